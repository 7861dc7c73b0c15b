"""The FiftyOne side of ``tests/harness/fiftyone_env.py``: runs in ``.venv-fiftyone``'s Python.

It reads one job a line on stdin, ``{"job": NAME, "arguments": {...}}``, runs ``JOBS[NAME]``
and answers one line on stdout, ``{"result": ...}`` or ``{"error": "<traceback>"}``, until
stdin ends; FiftyOne's own messages go to stderr. FiftyOne finds its database through
``FIFTYONE_DATABASE_URI``. camserve's site-packages (``CAMSERVE_SITE_PACKAGES``) are added
after FiftyOne's own, so the jobs that need camserve's engine import it from there while
FiftyOne keeps the versions it was installed with.
"""

from __future__ import annotations

import json
import os
import site
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fiftyone as fo

__all__ = ["JOBS", "add_cam_fields", "dump", "load_json", "main"]

SAMPLE_BUILTINS = ("filepath", "tags", "metadata")
"""The built-in sample fields a dump keeps apart from the labels."""
FIFTYONE_OWN = ("id", "created_at", "last_modified_at")
"""The built-in sample fields a dump leaves out: FiftyOne sets them itself."""


def load_json(path: str, name: str) -> dict[str, Any]:
    """``fiftyone.Dataset.from_json``, as docs/fiftyone.md tells users to load an export."""
    dataset = fo.Dataset.from_json(path, name=name, persistent=True)
    return {"name": dataset.name, "samples": len(dataset)}


def add_cam_fields(
    *,
    name: str,
    filepaths: list[str],
    models_dir: str,
    model: str,
    heatmaps_dir: str,
    options: dict[str, Any],
    in_dataset: bool = True,
) -> dict[str, Any]:
    """camserve's ``add_cam_fields`` with the model ``model`` of ``models_dir`` on the CPU, on
    the samples of ``filepaths``: those of a new dataset ``name`` (``in_dataset``), or
    ``fiftyone.Sample`` objects that are added to the new dataset only afterwards. ``options``
    are ``CamFieldOptions``' fields, the threshold as text (``"otsu"``, ``"0.5"``)."""
    # camserve's site-packages are on the path once main() has run.
    import torch  # noqa: PLC0415

    from camserve.engine.engine import CamEngine  # noqa: PLC0415
    from camserve.engine.images.regions import parse_threshold  # noqa: PLC0415
    from camserve.engine.models.registry import load_model  # noqa: PLC0415
    from camserve.labeling import fiftyone_export  # noqa: PLC0415
    from camserve.serving.served_models import find_spec  # noqa: PLC0415

    torch.set_num_threads(1)
    dataset = fo.Dataset(name, persistent=True)
    samples = [fo.Sample(filepath=path) for path in filepaths]
    if in_dataset:
        dataset.add_samples(samples)
    engine = CamEngine.from_loaded(load_model(find_spec(Path(models_dir), model)), device="cpu")
    settings = dict(options)
    if "methods" in settings:
        settings["methods"] = tuple(settings["methods"])
    if "threshold" in settings:
        settings["threshold"] = parse_threshold(settings["threshold"])
    skipped = fiftyone_export.add_cam_fields(
        dataset if in_dataset else samples,
        engine,
        Path(heatmaps_dir),
        fiftyone_export.CamFieldOptions(**settings),
    )
    if not in_dataset:
        dataset.add_samples(samples)
    return {"skipped": [{"path": item.path, "reason": item.reason} for item in skipped]}


def dump(name: str) -> dict[str, Any]:
    """The dataset ``name`` loaded from the database, as plain JSON: its name, media type,
    info, schema (every field and declared attribute, with FiftyOne's type string as
    ``samples.json`` writes it) and samples in their order, each with its filepath, tags,
    metadata, label fields (``to_dict()`` less FiftyOne's ids), for every ``Heatmap`` field
    the map as FiftyOne's ``get_map()`` reads it from its PNG, and for every ``Segmentation``
    field the mask ``get_mask()`` reads; and the dataset's ``mask_targets``."""
    dataset = fo.load_dataset(name)
    schema = dataset.get_field_schema(flat=True)
    return {
        "name": dataset.name,
        "media_type": dataset.media_type,
        "persistent": dataset.persistent,
        "info": dataset.info,
        "schema": {path: _type_string(field) for path, field in schema.items()},
        "mask_targets": {
            field: {str(index): label for index, label in targets.items()}
            for field, targets in dataset.mask_targets.items()
        },
        "samples": [_sample(sample, dataset) for sample in dataset.iter_samples()],
    }


def _type_string(field: Any) -> str:
    kind = f"{type(field).__module__}.{type(field).__name__}"
    document_type = getattr(field, "document_type", None)
    if document_type is None:
        return kind
    return f"{kind}({document_type.__module__}.{document_type.__name__})"


def _sample(sample: Any, dataset: Any) -> dict[str, Any]:
    values = sample.to_dict()
    builtins = {name: values.get(name) for name in SAMPLE_BUILTINS}
    labels = {
        name: _without_ids(values.get(name))
        for name in dataset.get_field_schema()
        if name not in (*SAMPLE_BUILTINS, *FIFTYONE_OWN)
    }
    maps = {name: _map(sample[name]) for name in labels if isinstance(sample[name], fo.Heatmap)}
    masks = {
        name: sample[name].get_mask().tolist()
        for name in labels
        if isinstance(sample[name], fo.Segmentation)
    }
    return {**builtins, "labels": labels, "maps": maps, "masks": masks}


def _map(heatmap: Any) -> list[Any] | None:
    """The heatmap's map as FiftyOne reads it (from ``map_path`` unless it holds the array)."""
    array = heatmap.get_map()
    return None if array is None else list(array.tolist())


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in ("_id", "id")}
    if isinstance(value, list):
        return [_without_ids(item) for item in value]
    return value


JOBS: dict[str, Callable[..., Any]] = {
    "add_cam_fields": add_cam_fields,
    "dump": dump,
    "load_json": load_json,
}


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"result": JOBS[request["job"]](**request["arguments"])}
    except Exception:  # every failure goes back to the caller, with its traceback
        return {"error": traceback.format_exc()}


def main() -> None:
    for folder in os.environ.get("CAMSERVE_SITE_PACKAGES", "").split(os.pathsep):
        if folder:
            site.addsitedir(folder)  # appended: FiftyOne's own packages come first
    # Answers get stdout to themselves: file descriptor 1 becomes a copy of stderr, so that
    # whatever else writes there (FiftyOne's log handler holds the original sys.stdout) goes
    # to the log.
    sys.stdout.flush()
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    for line in sys.stdin:
        answers.write(json.dumps(_answer(json.loads(line))) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
