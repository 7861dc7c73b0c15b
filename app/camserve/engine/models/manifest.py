"""Model manifests: one small TOML file per served model, validated into a ``ModelSpec``.

A manifest names the model, where its architecture and weights come from::

    name = "resnet50"
    source = "torchvision"         # optional: "torchvision" (default), "timm", "huggingface"
                                   # or "ultralytics" (models/ultralytics_manifest.py)
    architecture = "resnet50"      # the source's model name (Hugging Face: a model id or folder)
    weights = "IMAGENET1K_V2"      # a pretrained tag, "random", or a .pt/.pth/.safetensors file,
                                   # or "package:<package>/<file>" inside an installed package
    key_map = "by-name"            # optional: "by-order" maps a checkpoint's tensors in order
    layer = "layer4"               # optional: the family default otherwise
    input_size = [224, 224]        # optional: (height, width), or one number for a square
    mean = [0.485, 0.456, 0.406]   # optional, like std and interpolation
    resize = "stretch"             # optional: "stretch", "letterbox" or "shorter-side"
    num_classes = 1000             # optional
    labels = "labels.txt"          # optional: a list, a text / JSON file of labels, or
                                   # "torchvision:imagenet" (torchvision's ImageNet-1k names)
    task = "classification"        # optional: "detection" or "segmentation" for torchvision's
                                   # detectors and segmenters (models/dense.py)
    min_size = 800                 # detection only, optional: the detector's own resize
    max_size = 1333                #   (shorter side to min_size, longer side at most max_size)
    audit_images = "reference/"    # optional: the explanation report's reference images

``input_size``, ``mean``, ``std``, ``interpolation`` and ``labels`` default to what the source
publishes with the model (timm's pretrained config, Hugging Face's ``preprocessor_config.json``
and ``id2label``), and to ImageNet's 224 x 224, mean and std otherwise. Relative paths
(``weights``, ``labels``, a Hugging Face folder) are resolved against the manifest's folder.
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from camserve.engine.errors import ManifestError
from camserve.engine.images.resize_policy_names import ResizePolicy
from camserve.engine.models.packaged import KeyMap, is_packaged, parse_packaged
from camserve.engine.models.ultralytics_manifest import ultralytics_defaults, ultralytics_problem

if TYPE_CHECKING:
    from camserve.engine.images.preprocess import Preprocessing

__all__ = [
    "DEFAULT_MODELS_DIR",
    "MANIFEST_SUFFIX",
    "TORCHVISION_IMAGENET",
    "ModelSpec",
    "Source",
    "Task",
    "load_manifest",
    "manifest_paths",
    "read_labels_file",
]

Source = Literal["torchvision", "timm", "huggingface", "ultralytics"]
Task = Literal["classification", "detection", "segmentation"]

DEFAULT_MODELS_DIR = Path("models")
"""The folder of manifests when neither ``--models-dir`` nor ``CAMSERVE_MODELS_DIR`` names one."""
MANIFEST_SUFFIX = ".toml"
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
LOADER_FIELDS = frozenset({"source_dir"})
TORCHVISION_IMAGENET = "torchvision:imagenet"
"""A ``labels`` value: the ImageNet-1k class names torchvision publishes with its weights."""


class ModelSpec(BaseModel):
    """One model as its manifest describes it; ``source_dir`` is filled in by the loader."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    source: Source = "torchvision"
    architecture: str = Field(min_length=1)
    weights: str = Field(default="DEFAULT", min_length=1)
    key_map: KeyMap = "by-name"
    layer: str | None = None
    method: str | None = None
    """The method of a request that names none (default: ``gradcam``)."""
    fusion_layers: list[str] | None = None
    """Layers whose maps the pseudo-layer ``fused`` combines; when given, ``fused`` is the
    model's default layer in the API (``app/camserve/engine/fusion.py``)."""
    fusion_augment: list[Literal["hflip"]] | None = None
    """Views of each image (``hflip``: its mirror image) that the ``fused`` maps are averaged
    over, explained in the same batch (``camserve.engine.fusion``); needs ``fusion_layers``."""
    default_from_report: str | None = None
    """An ``audit.json`` written by ``camserve audit`` (relative to the manifest's folder): the
    default method and layer become its most faithful pair that passes the sanity check, where
    ``method`` and the layer (``fusion_layers``, else ``layer``) are not given
    (``camserve.engine.models.report_default``)."""
    input_size: tuple[int, int] | None = None
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None
    interpolation: Literal["bilinear", "bicubic"] | None = None
    resize: ResizePolicy = ResizePolicy.STRETCH
    num_classes: int | None = Field(default=None, ge=1)
    labels: list[str] | str | None = None
    description: str = ""
    task: Task = "classification"
    min_size: int | None = Field(default=None, ge=16)
    """A detector's internal resize: the shorter side it scales images to (torchvision's
    ``min_size``); ``max_size`` bounds the longer side."""
    max_size: int | None = Field(default=None, ge=16)
    audit_images: str | None = Field(default=None, min_length=1)
    """A folder of reference images for the server's explanation report (relative paths from
    the manifest's folder); default: the shipped samples named after the model, else the sample
    photos. Not part of the model's version: it changes no answer."""
    source_dir: Path | None = None

    @model_validator(mode="before")
    @classmethod
    def _source_defaults(cls, data: Any) -> Any:
        return ultralytics_defaults(data)

    @field_validator("name")
    @classmethod
    def _url_safe_name(cls, value: str) -> str:
        if not NAME_PATTERN.fullmatch(value):
            raise ValueError(
                f"{value!r} is not URL-safe: use letters, digits, '-', '_' and '.', "
                "starting with a letter or digit"
            )
        return value

    @field_validator("architecture", mode="before")
    @classmethod
    def _normalise_architecture(cls, value: object, info: ValidationInfo) -> object:
        """Names are lower-cased, except Hugging Face ids and folders, which are case-sensitive."""
        if not isinstance(value, str):
            return value
        keep_case = info.data.get("source") == "huggingface"
        return value.strip() if keep_case else value.strip().lower()

    @field_validator("weights", "layer", mode="before")
    @classmethod
    def _strip(cls, value: object) -> object:
        return value.strip() if isinstance(value, str) else value

    @field_validator("weights")
    @classmethod
    def _packaged_reference(cls, value: str) -> str:
        if is_packaged(value):
            parse_packaged(value)
        return value

    @field_validator("layer")
    @classmethod
    def _layer_not_empty(cls, value: str | None) -> str | None:
        if value == "":
            raise ValueError("must name a module (e.g. 'layer4'), or be left out for the default")
        return value

    @field_validator("input_size", mode="before")
    @classmethod
    def _square_from_int(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            return (value, value)
        return value

    @field_validator("input_size")
    @classmethod
    def _positive_size(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and min(value) < 1:
            raise ValueError(f"must be positive (height, width), got {list(value)}")
        return value

    @field_validator("std")
    @classmethod
    def _positive_std(
        cls, value: tuple[float, float, float] | None
    ) -> tuple[float, float, float] | None:
        if value is not None and min(value) <= 0:
            raise ValueError(f"every value must be > 0, got {list(value)}")
        return value

    @field_validator("labels")
    @classmethod
    def _usable_labels(cls, value: list[str] | str | None) -> list[str] | str | None:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must be a list of labels or the path of a labels file")
        if isinstance(value, list):
            _check_label_list(value)
        return value

    @model_validator(mode="after")
    def _labels_match_classes(self) -> ModelSpec:
        if isinstance(self.labels, list) and self.num_classes is not None:
            _check_label_count(len(self.labels), self.num_classes)
        return self

    @model_validator(mode="after")
    def _augment_needs_fusion(self) -> ModelSpec:
        if self.fusion_augment and not self.fusion_layers:
            raise ValueError("fusion_augment averages the fused maps: it needs fusion_layers")
        return self

    @model_validator(mode="after")
    def _detector_fields(self) -> ModelSpec:
        sized = [name for name in ("min_size", "max_size") if getattr(self, name) is not None]
        if sized and self.task != "detection":
            raise ValueError(f"{sized[0]} applies to task = 'detection' only")
        if self.task != "classification" and self.source in ("timm", "huggingface"):
            raise ValueError(f"task {self.task!r} needs source = 'torchvision'")
        problem = ultralytics_problem(self.model_dump())
        if problem is not None:
            raise ValueError(problem)
        return self

    def resolve_path(self, value: str | Path) -> Path:
        """``value`` with ``~`` expanded and, when relative, joined to the manifest's folder."""
        path = Path(value).expanduser()
        if path.is_absolute() or self.source_dir is None:
            return path
        return self.source_dir / path

    def audit_folder(self) -> Path | None:
        """``audit_images`` resolved, if given."""
        return None if self.audit_images is None else self.resolve_path(self.audit_images)

    def load_labels(self) -> list[str] | None:
        """The labels given in the manifest, read from their file where a path was given."""
        if self.labels is None or isinstance(self.labels, list):
            return self.labels
        if self.labels == TORCHVISION_IMAGENET:
            return imagenet_categories()
        try:
            labels = read_labels_file(self.resolve_path(self.labels))
            if self.num_classes is not None:
                _check_label_count(len(labels), self.num_classes)
        except ValueError as error:
            raise ManifestError(f"labels: {error}") from None
        return labels

    def preprocessing(self, published: Preprocessing | None = None) -> Preprocessing:
        """The input this model expects: the manifest's values where given, else the source's
        ``published`` ones, else ImageNet's."""
        from camserve.engine.images.preprocess import Preprocessing  # noqa: PLC0415 - needs torch

        base = published or Preprocessing()
        return Preprocessing(
            input_size=self.input_size or base.input_size,
            mean=self.mean or base.mean,
            std=self.std or base.std,
            interpolation=self.interpolation or base.interpolation,
            resize=self.resize,
        )


def imagenet_categories() -> list[str]:
    """The 1000 ImageNet-1k class names torchvision ships with its weights (no download)."""
    import torchvision  # noqa: PLC0415 - only for these labels, and it takes seconds to import

    categories = torchvision.models.ResNet50_Weights.DEFAULT.meta["categories"]
    return [str(name) for name in categories]


def _check_label_list(labels: list[str]) -> None:
    if not labels:
        raise ValueError("must not be empty")
    blank = [index for index, label in enumerate(labels) if not label.strip()]
    if blank:
        raise ValueError(f"labels must not be blank (entry {blank[0]} is)")


def _check_label_count(count: int, num_classes: int) -> None:
    if count != num_classes:
        raise ValueError(
            f"labels has {count} entries but num_classes is {num_classes}; give one label per class"
        )


def read_labels_file(path: Path) -> list[str]:
    """Labels from a file: a JSON list of strings, or one label per line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"cannot read labels file {path}: {error}") from error
    labels = _json_labels(text, path) if text.lstrip().startswith("[") else _line_labels(text)
    try:
        _check_label_list(labels)
    except ValueError as error:
        raise ValueError(f"labels file {path}: {error}") from error
    return labels


def _json_labels(text: str, path: Path) -> list[str]:
    try:
        labels = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"labels file {path} is not valid JSON: {error}") from error
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise ValueError(f"labels file {path} must hold a JSON list of strings")
    return labels


def _line_labels(text: str) -> list[str]:
    return [line.strip() for line in text.rstrip().splitlines()]


# ---------------------------------------------------------------------------- loading files


def load_manifest(path: Path) -> ModelSpec:
    """Read and validate one manifest; any problem is a ``ManifestError`` naming the file."""
    data = _read_toml(path)
    loader_fields = sorted(LOADER_FIELDS & data.keys())
    if loader_fields:
        raise ManifestError(f"{path}: field {loader_fields[0]!r} is set by camserve, remove it")
    try:
        spec = ModelSpec.model_validate({**data, "source_dir": path.parent.resolve()})
        if spec.labels != TORCHVISION_IMAGENET:  # torchvision's own list needs no check
            spec.load_labels()  # a labels file: read now, so that its problems name the manifest
    except ValidationError as error:
        raise ManifestError(f"{path}: {_describe_validation(error)}") from None
    except ManifestError as error:
        raise ManifestError(f"{path}: {error}") from None
    return spec


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(f"{path}: invalid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise ManifestError(f"{path}: not UTF-8 text: {error}") from None
    except OSError as error:
        raise ManifestError(f"{path}: cannot read manifest: {error.strerror or error}") from None


def _describe_validation(error: ValidationError) -> str:
    return "; ".join(_describe_issue(issue) for issue in error.errors(include_url=False))


def _describe_issue(issue: ErrorDetails) -> str:
    location = ".".join(str(part) for part in issue["loc"])
    if issue["type"] == "extra_forbidden":
        return f"unknown field {location!r}{_suggestion(str(issue['loc'][0]))}"
    if issue["type"] == "missing" and len(issue["loc"]) > 1:
        return f"field {issue['loc'][0]!r}: too few values (item {issue['loc'][-1]} is missing)"
    if issue["type"] == "missing":
        return f"missing required field {location!r}"
    message = issue["msg"].removeprefix("Value error, ")
    return f"field {location!r}: {message}" if location else message


def _suggestion(field: str) -> str:
    known = [name for name in ModelSpec.model_fields if name not in LOADER_FIELDS]
    close = difflib.get_close_matches(field, known, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (known fields: {', '.join(known)})"


def manifest_paths(folder: Path) -> list[Path]:
    """The manifest files directly in ``folder`` (``*.toml``), in file-name order."""
    return sorted(folder.glob(f"*{MANIFEST_SUFFIX}"))
