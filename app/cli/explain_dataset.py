"""``camserve explain-dataset``: a whole dataset explained on Ray Data into Parquet rows."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import (
    ArchitectureOption,
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
)
from app.config import DEFAULT_MODELS_DIR
from app.dataset.explained import ExplainOptions
from app.engine.detection_maps import DEFAULT_MAX_DETECTIONS, DEFAULT_SCORE_THRESHOLD
from app.engine.errors import CamserveError
from app.engine.fusion import FUSED_LAYER
from app.engine.images.regions import parse_threshold
from app.engine.models.manifest import ModelSpec
from app.serving.served_models import find_spec, first_loadable

__all__ = ["explain_dataset_command"]

MEBIBYTE = 1 << 20


class HeatmapStore(StrEnum):
    PNG = "png"
    """The PNG bytes in the row."""
    FILES = "files"
    """PNG files beside the output, their paths in the rows."""


@cli.command("explain-dataset")
def explain_dataset_command(
    source: Annotated[
        str,
        typer.Argument(
            metavar="INPUT",
            help="A folder, a glob ('photos/*.jpg'), or a CSV/Parquet/JSONL manifest with a "
            "'path' column (and optionally 'id'); local, or any URI pyarrow opens (s3://...).",
        ),
    ],
    output: Annotated[
        str, typer.Option("--output", "-o", help="Folder of Parquet files (local or a URI).")
    ],
    model: ModelOption = None,
    architecture: ArchitectureOption = None,
    weights: WeightsOption = "DEFAULT",
    method: Annotated[
        str | None,
        typer.Option(help="CAM method(s), comma-separated; default: the model's own."),
    ] = None,
    layer: LayerOption = None,
    target: TargetOption = None,
    top_k: Annotated[int, typer.Option(min=1, help="Explain the k most likely classes.")] = 1,
    score_threshold: ScoreThresholdOption = DEFAULT_SCORE_THRESHOLD,
    max_detections: Annotated[
        int, typer.Option(min=1, help="Detectors: explain at most this many detections per image.")
    ] = DEFAULT_MAX_DETECTIONS,
    threshold: Annotated[
        str, typer.Option(help="Region threshold: fraction of the heatmap's maximum, or 'otsu'.")
    ] = "0.5",
    largest_region: Annotated[
        bool, typer.Option(help="Keep only each heatmap's largest region.")
    ] = False,
    heatmaps: Annotated[
        HeatmapStore,
        typer.Option(help="png: heatmap PNG bytes in each row; files: PNG files, paths in rows."),
    ] = HeatmapStore.PNG,
    heatmap_dir: Annotated[
        str | None, typer.Option(help="With --heatmaps files: where (default: OUTPUT_heatmaps).")
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Images per engine call.")] = 1,
    rows_per_batch: Annotated[
        int, typer.Option(min=1, help="Images per Ray Data batch handed to an actor.")
    ] = 64,
    actors: Annotated[
        int | None,
        typer.Option(min=1, help="Engines at once (default: one per GPU, else one per CPU)."),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(help="Ray cluster to join (host:port or ray://...); default: a local Ray."),
    ] = None,
    object_store_mb: Annotated[
        int, typer.Option(min=64, help="The local Ray's object store, in MiB.")
    ] = 1024,
    device: DeviceOption = "auto",
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
) -> None:
    """Explain every image of INPUT on Ray Data; write one Parquet row per (image, explained
    class or detection, method) to OUTPUT, as it goes.

    A rerun skips the images OUTPUT already holds. Images that cannot be read become rows with
    an error (listed at the end); they do not fail the run."""
    from app.dataset.job import DatasetJob, explain_dataset  # noqa: PLC0415 (Ray loads slowly)
    from app.dataset.rows import RowOptions  # noqa: PLC0415 (pyarrow: the dataset extra)

    methods = tuple(dict.fromkeys(n.strip() for n in (method or "").split(",") if n.strip()))
    try:
        rows = RowOptions(
            threshold=parse_threshold(threshold),
            largest_only=largest_region,
            heatmap_dir=(heatmap_dir or f"{output.rstrip('/')}_heatmaps")
            if heatmaps is HeatmapStore.FILES
            else None,
        )
        job = DatasetJob(
            source=source,
            output=output,
            spec=_spec(
                models_dir, model, architecture, weights, None if layer == FUSED_LAYER else layer
            ),
            options=ExplainOptions(
                methods=methods,
                layer=layer,
                target=target,
                top_k=top_k,
                batch_size=batch_size,
                score_threshold=score_threshold,
                max_detections=max_detections,
            ),
            rows=rows,
            actors=actors,
            device=device,
            address=address,
            object_store_bytes=object_store_mb * MEBIBYTE,
            rows_per_batch=rows_per_batch,
        )
        summary = explain_dataset(job)
    except CamserveError as error:
        raise fail(str(error)) from error
    for aside in summary.set_aside:
        console.print(f"[yellow]set aside[/] half-written {aside}", highlight=False, soft_wrap=True)
    for image_id, reason in sorted(summary.failures.items()):
        console.print(f"[yellow]failed[/] {image_id}: {reason}", highlight=False, soft_wrap=True)
    console.print(
        f"{summary.images} images ({len(summary.failures)} failed) in {summary.seconds:.1f} s, "
        f"{summary.images_per_s:.2f} images/s; {summary.already_written} already in {output}",
        highlight=False,
        soft_wrap=True,
    )


def _spec(
    models_dir: Path, model: str | None, architecture: str | None, weights: str, layer: str | None
) -> ModelSpec:
    """The model's manifest; with neither --model nor --architecture, the server's default
    (the first model in the folder that loads)."""
    if model is not None or architecture is not None:
        return choose_spec(models_dir, model, architecture, weights, layer)
    loaded, _ = first_loadable(models_dir)
    console.print(f"model: {loaded.name} (the default; choose one with --model)", highlight=False)
    return find_spec(models_dir, loaded.name)
