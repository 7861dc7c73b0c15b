"""What the detector's and the segmenter's adapters share: what the API says of a dense model
(``served_dense``), with its default method checked against the ones its kind takes."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from camserve.engine.errors import ManifestError
from camserve.engine.methods import get_method
from camserve.engine.models.dense import LoadedDenseModel, published_categories
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.weights import resolve_weights
from camserve.serving.served_model import ServedModel

__all__ = ["dense_labels", "served_dense"]


def served_dense(
    spec: ModelSpec,
    loaded: LoadedDenseModel,
    device: torch.device,
    *,
    methods: list[str],
    default: str,
    layer_names: Sequence[str],
    input_size: tuple[int, int],
) -> ServedModel:
    """What the API says of the detector or segmenter ``loaded``: ``methods`` are those its
    kind takes, ``default`` the method of a manifest that names none."""
    return ServedModel(
        name=spec.name,
        architecture=spec.architecture,
        weights=loaded.weights,
        description=spec.description,
        layer=loaded.layer,
        method=_default_method(loaded, methods, default),
        candidate_layers=list(loaded.candidate_layers),
        layer_names=frozenset(layer_names),
        labels=list(loaded.labels),
        input_size=input_size,
        device=str(device),
        task=loaded.task,
        methods=methods,
    )


def _default_method(loaded: LoadedDenseModel, methods: list[str], default: str) -> str:
    """The manifest's method, when the model's task can use it; else ``default``."""
    if loaded.method is None:
        return default
    method = get_method(loaded.method).name
    if method not in methods:
        raise ManifestError(
            f"model {loaded.name!r}: method {method!r} does not apply to a {loaded.task} model; "
            f"choose one of: {', '.join(methods)}"
        )
    return method


def dense_labels(spec: ModelSpec) -> list[str]:
    """A detector's or segmenter's labels, without building it: from its manifest or
    torchvision's published categories."""
    source = resolve_weights(spec.architecture, spec.weights, spec.source_dir)
    return spec.load_labels() or published_categories(spec.architecture, source)
