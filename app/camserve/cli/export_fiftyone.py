"""``camserve export-fiftyone``: CAM heatmaps and boxes of images as a FiftyOne dataset."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from camserve.cli.common import (
    ArchitectureOption,
    BatchSizeOption,
    DeviceOption,
    LayerOption,
    ModelOption,
    ModelsDir,
    ScoreThresholdOption,
    TargetOption,
    WeightsOption,
    choose_spec,
    cli,
    console,
    fail,
    progress_bar,
    report_ignored,
)
from camserve.config import DEFAULT_MODELS_DIR
from camserve.engine.detection_maps import DEFAULT_MAX_DETECTIONS, DEFAULT_SCORE_THRESHOLD
from camserve.engine.engine import CamEngine
from camserve.engine.errors import CamserveError
from camserve.engine.images.image_files import InputFile, find_images
from camserve.engine.images.regions import parse_threshold
from camserve.engine.models.dense import load_dense_model
from camserve.engine.models.devices import resolve_device
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.registry import load_model
from camserve.labeling.fiftyone_dense import export_dense_images
from camserve.labeling.fiftyone_export import (
    DEFAULT_FIELD,
    CamFieldOptions,
    ExportSummary,
    export_images,
)
from camserve.serving.tasks.lookup import task_adapter

__all__ = ["export_fiftyone"]


class Regions(StrEnum):
    LARGEST = "largest"
    ALL = "all"


@cli.command("export-fiftyone")
def export_fiftyone(
    inputs: Annotated[list[Path], typer.Argument(help="Image files or folders (recursive).")],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for samples.json and heatmaps/.")
    ],
    model: ModelOption = None,
    architecture: ArchitectureOption = None,
    weights: WeightsOption = "DEFAULT",
    method: Annotated[
        str, typer.Option(help="CAM method, or several comma-separated (two fields each).")
    ] = "gradcam",
    layer: LayerOption = None,
    target: TargetOption = None,
    threshold: Annotated[
        str, typer.Option(help="Box threshold: fraction of the heatmap's maximum, or 'otsu'.")
    ] = "0.5",
    regions: Annotated[
        Regions, typer.Option(help="The largest region of each heatmap, or all of them.")
    ] = Regions.LARGEST,
    field: Annotated[str, typer.Option(help="Prefix of the field names.")] = DEFAULT_FIELD,
    name: Annotated[
        str | None, typer.Option(help="Dataset name in samples.json (default: the output name).")
    ] = None,
    batch_size: BatchSizeOption = 8,
    device: DeviceOption = "auto",
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
    score_threshold: ScoreThresholdOption = DEFAULT_SCORE_THRESHOLD,
    max_detections: Annotated[
        int, typer.Option(min=0, help="Detectors: heatmaps for this many detections.")
    ] = DEFAULT_MAX_DETECTIONS,
) -> None:
    """Write CAM heatmaps and their boxes as a FiftyOne dataset.

    Heatmaps: OUTPUT/heatmaps/METHOD/RELATIVE_PATH.png, 8-bit grayscale, at the image's size.

    Fields: FIELD_METHOD (Heatmap), FIELD_METHOD_boxes (Detections), FIELD_prediction; a
    segmenter adds FIELD_segmentation (Segmentation); a detector gives FIELD_detections (its
    boxes) and FIELD_METHOD_RANK (Heatmap) for each of its first MAX_DETECTIONS detections.

    Load with: fiftyone.Dataset.from_json("OUTPUT/samples.json"); see docs/fiftyone.md.
    """
    files = find_images(inputs)
    report_ignored(inputs)
    if not files:
        raise fail("no image files found in the given paths")
    try:
        options = CamFieldOptions(
            methods=_split_methods(method),
            layer=layer,
            target=target,
            threshold=parse_threshold(threshold),
            regions=regions.value,
            prefix=field,
            batch_size=batch_size,
            score_threshold=score_threshold,
            max_detections=max_detections,
        )
        spec = choose_spec(models_dir, model, architecture, weights, layer)
        dataset_name = name or output.resolve().name
        if task_adapter(spec.task).predicted_regions is not None:  # boxes or masks
            summary = _export_dense(spec, files, output, options, dataset_name, device)
        else:
            engine = CamEngine.from_loaded(load_model(spec), device=device)
            info = _info(spec.name, engine.layer, options)
            summary = _export_with_progress(engine, files, output, options, dataset_name, info)
    except CamserveError as error:
        raise fail(str(error)) from error
    for skipped in summary.skipped:
        console.print(
            f"[yellow]skipped[/] {skipped.path}: {skipped.reason}", highlight=False, soft_wrap=True
        )
    if summary.exported == 0:
        raise fail("none of the images could be read")
    console.print(
        f"exported {summary.exported} of {summary.exported + len(summary.skipped)} images "
        f"to {summary.samples_path}\n"
        f'load it with: fiftyone.Dataset.from_json("{summary.samples_path}")',
        highlight=False,
        soft_wrap=True,
    )


def _split_methods(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.split(",") if name.strip())


def _info(model: str, layer: str, options: CamFieldOptions) -> dict[str, Any]:
    """What produced the labels, kept in the dataset's ``info``."""
    threshold = options.threshold
    return {
        "model": model,
        "layer": options.layer or layer,
        "methods": list(options.methods),
        "target": options.target,
        "threshold": "otsu" if threshold.method == "otsu" else threshold.value,
        "regions": options.regions,
    }


def _export_dense(
    spec: ModelSpec,
    files: list[InputFile],
    output: Path,
    options: CamFieldOptions,
    name: str,
    device: str,
) -> ExportSummary:
    """A detector's or segmenter's predictions and heatmaps (``labeling/fiftyone_dense``)."""
    loaded = load_dense_model(spec)
    info = _info(spec.name, loaded.layer, options)
    if task_adapter(loaded.task).lists_detections:
        info.update(score_threshold=options.score_threshold, max_detections=options.max_detections)
    with progress_bar("explaining") as progress:
        task = progress.add_task("explaining", total=len(files))
        return export_dense_images(
            loaded,
            files,
            output,
            options,
            name=name,
            info=info,
            device=resolve_device(device),
            on_done=lambda: progress.advance(task),
        )


def _export_with_progress(
    engine: CamEngine,
    files: list[InputFile],
    output: Path,
    options: CamFieldOptions,
    name: str,
    info: dict[str, Any],
) -> ExportSummary:
    with progress_bar("explaining") as progress:
        task = progress.add_task("explaining", total=len(files))
        return export_images(
            engine,
            files,
            output,
            options,
            name=name,
            info=info,
            on_done=lambda: progress.advance(task),
        )
