"""``camserve explain-dataset``: a whole dataset explained into Parquet rows, in this process or
on Ray Data, with camserve's own progress report."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from camserve.cli.common import (
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
from camserve.config import DEFAULT_MODELS_DIR
from camserve.dataset.explained import ExplainOptions
from camserve.dataset.run_place import IN_PROCESS_BELOW, RunPlace
from camserve.engine.detection_maps import DEFAULT_MAX_DETECTIONS, DEFAULT_SCORE_THRESHOLD
from camserve.engine.errors import CamserveError
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.images.regions import parse_threshold
from camserve.engine.models.manifest import ModelSpec
from camserve.serving.served_models import find_spec, first_loadable
from camserve_client.progress import ProgressReport

if TYPE_CHECKING:
    from camserve.dataset.job import DatasetJob, DatasetSummary

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
    on_ray: Annotated[
        bool | None,
        typer.Option(
            "--ray/--in-process",
            help="Where the images are explained: on Ray, or in this process with one engine "
            f"(as `camserve explain`). Default: in this process below {IN_PROCESS_BELOW} images "
            "to explain, else on Ray; --address or --actors mean Ray.",
            show_default=False,
        ),
    ] = None,
    actors: Annotated[
        int | None,
        typer.Option(
            min=1, help="Ray actors, engines at once (default: one per GPU, else one per CPU)."
        ),
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
    verbose: Annotated[
        bool, typer.Option("--verbose", help="Ray's own log lines and progress bars too.")
    ] = False,
) -> None:
    """Explain every image of INPUT, in this process or on Ray Data; write one Parquet row per
    (image, explained class or detection, method) to OUTPUT, as it goes.

    Progress on stderr: done/total, images/s and the time left (one line redrawn on a
    terminal, else a line every tenth or 30 s), then a summary. A rerun skips the images OUTPUT
    already holds. Images that cannot be read become rows with an error (listed at the end);
    they do not fail the run."""
    from camserve.dataset.job import DatasetJob  # noqa: PLC0415 (pyarrow: the dataset extra)
    from camserve.dataset.rows import RowOptions  # noqa: PLC0415

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
            place=RunPlace.AUTO if on_ray is None else RunPlace.RAY if on_ray else RunPlace.HERE,
            ray_logs=verbose,
        )
        summary = _run_with_progress(job)
    except CamserveError as error:
        raise fail(str(error)) from error
    for image_id, reason in sorted(summary.failures.items()):
        console.print(f"[yellow]failed[/] {image_id}: {reason}", highlight=False, soft_wrap=True)
    console.print(
        f"{summary.images} images ({len(summary.failures)} failed), {summary.rows} rows in "
        f"{summary.seconds:.1f} s, {summary.images_per_s:.2f} images/s; "
        f"{summary.already_written} already in {output}",
        highlight=False,
        soft_wrap=True,
    )


def _run_with_progress(job: DatasetJob) -> DatasetSummary:
    """Plan the job, say where it runs, and run it under camserve's own progress report."""
    from camserve.dataset.job import plan_dataset, run_plan  # noqa: PLC0415

    plan = plan_dataset(job)
    for aside in plan.set_aside:
        console.print(f"[yellow]set aside[/] half-written {aside}", highlight=False, soft_wrap=True)
    if not plan.todo:
        return run_plan(plan)
    where = "on Ray" if plan.where.on_ray else "in this process"
    console.print(
        f"{len(plan.todo)} images to explain {where} ({plan.where.reason})",
        highlight=False,
        soft_wrap=True,
    )
    with ProgressReport(len(plan.todo), description="explaining") as report:
        return run_plan(plan, report.advance)


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
