"""What a Label Studio project asks for: its image inputs and the controls camserve can fill.

The labeling config (Label Studio's XML) is parsed with label-studio-sdk's ``LabelInterface``.
camserve fills ``RectangleLabels``, ``PolygonLabels``, ``BrushLabels`` and ``Choices`` that point
at an ``Image``; other controls are left to the annotators.

Model classes are matched to a control's labels in this order: the operator's mapping (model
label → project label), the label's own ``predicted_values`` attribute (Label Studio's way of
listing the model outputs a label stands for), then the label's name, ignoring case, spaces,
hyphens and underscores. A class that matches nothing is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, cast

from camserve.engine.errors import ExplanationError

__all__ = [
    "CONTROL_KINDS",
    "ControlKind",
    "ImageControls",
    "LabelConfigError",
    "LabelControl",
    "parse_label_config",
]

ControlKind = Literal["rectanglelabels", "polygonlabels", "brushlabels", "choices"]
CONTROL_KINDS: tuple[ControlKind, ...] = (
    "rectanglelabels",
    "polygonlabels",
    "brushlabels",
    "choices",
)


class LabelConfigError(ExplanationError):
    """The labeling config is not valid XML or not a Label Studio config."""

    code = "invalid_label_config"


def _normalized(name: str) -> str:
    return re.sub(r"[\s_\-]+", " ", name).strip().casefold()


@dataclass(frozen=True)
class LabelControl:
    """One control to fill: its name, kind, the image it annotates, and its labels."""

    name: str
    kind: ControlKind
    to_name: str
    labels: tuple[str, ...]
    predicted_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Project label → the model labels it stands for (the ``predicted_values`` attribute)."""

    def project_label(self, model_label: str, mapping: Mapping[str, str]) -> str | None:
        """The project label for a model class, or None when the class maps to none here."""
        mapped = mapping.get(model_label)
        if mapped is not None:
            return mapped if mapped in self.labels else None
        wanted = _normalized(model_label)
        for label, values in self.predicted_values.items():
            if wanted in {_normalized(value) for value in values}:
                return label
        for label in self.labels:
            if _normalized(label) == wanted:
                return label
        return None


@dataclass(frozen=True)
class ImageControls:
    """An ``Image`` tag (its name and the task data key it reads) and the controls on it."""

    name: str
    data_key: str
    controls: tuple[LabelControl, ...]


def parse_label_config(config: str) -> list[ImageControls]:
    """The images of a labeling config that have at least one control camserve can fill."""
    from label_studio_sdk.label_interface.interface import LabelInterface  # noqa: PLC0415

    try:
        interface = LabelInterface(config)
    except Exception as error:
        raise LabelConfigError(
            f"label_config is not a Label Studio labeling config: {error}"
        ) from None
    images = {tag.name: str(tag.value) for tag in interface.objects if tag.tag.lower() == "image"}
    controls = [
        _control(tag.name, tag.tag.lower(), to_name, tag.labels_attrs or {})
        for tag in interface.controls
        if tag.tag.lower() in CONTROL_KINDS
        for to_name in tag.to_name or []
        if to_name in images
    ]
    return [
        ImageControls(name, images[name].removeprefix("$"), tuple(by_image))
        for name in images
        if (by_image := [control for control in controls if control.to_name == name])
    ]


def _control(name: str, kind: str, to_name: str, label_tags: Mapping[str, object]) -> LabelControl:
    predicted: dict[str, tuple[str, ...]] = {}
    for label, tag in label_tags.items():
        attributes: Mapping[str, str] = getattr(tag, "attr", None) or {}
        values = attributes.get("predicted_values", "")
        if values:
            predicted[label] = tuple(value.strip() for value in values.split(",") if value.strip())
    return LabelControl(name, cast(ControlKind, kind), to_name, tuple(label_tags), predicted)
