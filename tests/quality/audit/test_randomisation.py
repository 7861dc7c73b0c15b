"""The cascade's units for dense models: a detector's or a segmenter's head first, then its
backbone stage by stage; an auxiliary head, which the output does not read, is no unit."""

from __future__ import annotations

from torchvision.models.segmentation import fcn_resnet50

from camserve.engine.models.segmenters import SegmentationScores
from camserve.quality.audit.randomisation import cascade_units, last_block
from tests.quality.audit.subjects.dense import shipped_subject


def test_a_detector_randomises_its_heads_then_its_backbone_stage_by_stage() -> None:
    detector = shipped_subject("shapes-detector").model
    assert cascade_units(detector) == [
        "roi_heads",
        "rpn",
        "backbone.smooth3",
        "backbone.smooth2",
        "backbone.lateral3",
        "backbone.lateral2",
        "backbone.layer3",
        "backbone.layer2",
        "backbone.layer1",
        "backbone.stem",
    ]
    assert last_block(detector) == "roi_heads"


def test_a_segmenter_randomises_its_head_then_its_stages() -> None:
    segmenter = shipped_subject("shapes-segmenter").model
    assert cascade_units(segmenter) == [
        "classifier",
        "backbone.layer4",
        "backbone.layer3",
        "backbone.layer2",
        "backbone.layer1",
        "backbone.stem",
    ]
    assert last_block(segmenter) == "classifier"


def test_an_auxiliary_head_is_no_unit() -> None:
    wrapped = SegmentationScores(fcn_resnet50(weights=None, weights_backbone=None, aux_loss=True))
    assert "aux_classifier" in dict(wrapped.named_children())
    units = cascade_units(wrapped)
    assert units[:2] == ["classifier", "backbone.layer4"]
    assert units[-2:] == ["backbone.bn1", "backbone.conv1"]
    assert not any(unit.startswith("aux") for unit in units)
