"""Object detectors from Hugging Face transformers, read from a local ``save_pretrained`` folder.

RT-DETR and DETR answer with one class-logit row and one box per query, and no NMS: each kept
detection is one query's class logit. The folder holds ``config.json`` and the weights that
``save_pretrained`` wrote, and ``preprocessor_config.json`` when the image processor was saved
beside them; everything is read with ``local_files_only``, so nothing is downloaded. transformers
is imported, and the model built, on the first ``HfDetectorFolder.load`` only.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from camserve.engine.errors import ManifestError
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.sources import require_extra

__all__ = [
    "QUERY_SCORES",
    "HfDetector",
    "HfDetectorFolder",
    "detector_folder",
    "load_hf_detector",
]

EXTRA = "huggingface"
QUERY_SCORES = {"rt_detr": "sigmoid", "detr": "softmax"}
"""How each supported ``model_type`` turns a query's logits into scores, as its image processor's
``post_process_object_detection`` does: RT-DETR a sigmoid per class and the best
queries x classes pairs, DETR a softmax whose last class ("no object") is left out."""
LOCAL = {"local_files_only": True}
"""Read the folder only: never the Hub."""
STAGE = re.compile(r"backbone\..*\.stages\.\d+$")


@dataclass(frozen=True)
class HfDetector:
    """A query-based detector, ready to run: the model, its image processor and what they say."""

    module: nn.Module
    processor: Any
    """The folder's image processor (``AutoImageProcessor``)."""
    scores: str
    """``"sigmoid"`` or ``"softmax"`` (``QUERY_SCORES``)."""
    labels: list[str]
    """The class names, from the config's ``id2label``."""
    default_layer: str
    """The backbone's last stage: the finest-grained layer whose map covers the whole image."""


class HfDetectorFolder:
    """A ``save_pretrained`` folder whose detector is loaded on first use, then kept."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._detector: HfDetector | None = None
        self._lock = threading.Lock()

    def load(self) -> HfDetector:
        with self._lock:
            if self._detector is None:
                self._detector = load_hf_detector(self.folder)
            return self._detector


def detector_folder(spec: ModelSpec) -> HfDetectorFolder:
    """The detector of a ``source = "huggingface"`` manifest, whose ``architecture`` names its
    ``save_pretrained`` folder (relative to the manifest's folder); nothing is read yet. A
    detector is never fetched from the Hub: the folder must exist."""
    folder = spec.resolve_path(spec.architecture)
    if not folder.is_dir():
        raise ManifestError(
            f"model {spec.name!r}: the Hugging Face detector folder {folder} does not exist; "
            "point 'architecture' at the folder that save_pretrained wrote (config.json and "
            "the weights, with preprocessor_config.json if the image processor was saved)"
        )
    return HfDetectorFolder(folder)


def load_hf_detector(folder: Path) -> HfDetector:
    """The detector saved in ``folder``; ``ManifestError`` when it is not such a folder."""
    if not (folder / "config.json").is_file():
        raise ManifestError(
            f"{folder} is not a Hugging Face save_pretrained folder: it has no config.json"
        )
    transformers = require_extra("transformers", EXTRA)
    config = _read(folder, lambda: transformers.AutoConfig.from_pretrained(folder, **LOCAL))
    scores = QUERY_SCORES.get(str(config.model_type))
    if scores is None:
        raise ManifestError(
            f"{folder} holds a {config.model_type!r} model; camserve explains the Hugging Face "
            f"detectors {', '.join(sorted(QUERY_SCORES))}"
        )
    module = _read(
        folder,
        lambda: transformers.AutoModelForObjectDetection.from_pretrained(folder, **LOCAL),
    )
    module.eval()
    processor = _processor(transformers, folder, config)
    return HfDetector(module, processor, scores, _labels(config), _default_layer(module))


def _read(folder: Path, load: Any) -> Any:
    try:
        return load()
    except (OSError, ValueError) as error:
        reason = (str(error) or type(error).__name__).splitlines()[0]
        raise ManifestError(f"{folder} is not a Hugging Face detector folder: {reason}") from error


def _processor(transformers: Any, folder: Path, config: Any) -> Any:
    """The saved image processor, else the model type's own with its default settings."""
    if (folder / "preprocessor_config.json").is_file():
        return _read(
            folder, lambda: transformers.AutoImageProcessor.from_pretrained(folder, **LOCAL)
        )
    name = "RTDetrImageProcessor" if config.model_type == "rt_detr" else "DetrImageProcessor"
    return getattr(transformers, name)()


def _labels(config: Any) -> list[str]:
    id2label = getattr(config, "id2label", None) or {}
    return [str(id2label.get(index, index)) for index in range(config.num_labels)]


def _default_layer(module: nn.Module) -> str:
    stages = [name for name, _ in module.named_modules() if STAGE.search(name)]
    if not stages:
        raise ManifestError("camserve knows no default layer for this detector; set 'layer'")
    return str(stages[-1])
