"""Reading a Label Studio labeling config: images, fillable controls, label mapping."""

from __future__ import annotations

import pytest

from camserve.labeling.label_config import LabelConfigError, parse_label_config

CONFIG = """
<View>
  <Image name="left" value="$first"/>
  <Image name="right" value="$second"/>
  <Text name="caption" value="$text"/>
  <RectangleLabels name="boxes" toName="left">
    <Label value="Cat" predicted_values="tabby,tiger_cat"/>
    <Label value="golden retriever"/>
  </RectangleLabels>
  <Choices name="kind" toName="right" choice="single">
    <Choice value="Dog"/>
  </Choices>
  <BrushLabels name="paint" toName="right"><Label value="Dog"/></BrushLabels>
  <TextArea name="notes" toName="left"/>
  <Labels name="spans" toName="caption"><Label value="Cat"/></Labels>
</View>
"""


def test_images_with_their_data_keys_and_fillable_controls() -> None:
    left, right = parse_label_config(CONFIG)
    assert (left.name, left.data_key) == ("left", "first")
    assert [(c.name, c.kind) for c in left.controls] == [("boxes", "rectanglelabels")]
    assert (right.name, right.data_key) == ("right", "second")
    assert [(c.name, c.kind) for c in right.controls] == [
        ("kind", "choices"),
        ("paint", "brushlabels"),
    ]
    assert left.controls[0].labels == ("Cat", "golden retriever")
    assert left.controls[0].predicted_values == {"Cat": ("tabby", "tiger_cat")}


@pytest.mark.parametrize(
    ("model_label", "mapping", "expected"),
    [
        ("tabby", {}, "Cat"),
        ("tiger cat", {}, "Cat"),
        ("golden_retriever", {}, "golden retriever"),
        ("Golden-Retriever", {}, "golden retriever"),
        ("cat", {}, "Cat"),
        ("Egyptian cat", {}, None),
        ("Egyptian cat", {"Egyptian cat": "Cat"}, "Cat"),
        ("tabby", {"tabby": "Dog"}, None),
    ],
)
def test_model_classes_map_to_project_labels(
    model_label: str, mapping: dict[str, str], expected: str | None
) -> None:
    boxes = parse_label_config(CONFIG)[0].controls[0]
    assert boxes.project_label(model_label, mapping) == expected


def test_configs_without_fillable_controls_give_no_images() -> None:
    assert parse_label_config('<View><Image name="i" value="$i"/></View>') == []


@pytest.mark.parametrize("config", ["<View><Image", "not xml at all"])
def test_broken_configs_are_refused(config: str) -> None:
    with pytest.raises(LabelConfigError, match="label_config"):
        parse_label_config(config)
