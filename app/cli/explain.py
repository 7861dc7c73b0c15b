"""``camserve explain``: overlays for files and folders."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.common import (
    ArchitectureOption,
    BatchSizeOption,
    DeviceOption,
    LayerOption,
    ModelOption,
    ModelsDir,
    TargetOption,
    WeightsOption,
    choose_spec,
    cli,
    console,
    fail,
    progress_bar,
)
from app.cli.folder_explainer import ExplainOptions, FileResult, explain_files, write_summary
from app.config import DEFAULT_MODELS_DIR
from app.engine.engine import CamEngine
from app.engine.errors import CamserveError
from app.engine.image_files import InputFile, find_images
from app.engine.registry import load_model

__all__ = ["explain"]


@cli.command()
def explain(
    inputs: Annotated[list[Path], typer.Argument(help="Image files or folders (recursive).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the results.")],
    model: ModelOption = None,
    architecture: ArchitectureOption = None,
    weights: WeightsOption = "DEFAULT",
    method: Annotated[str, typer.Option(help="CAM method.")] = "gradcam",
    layer: LayerOption = None,
    target: TargetOption = None,
    top_k: Annotated[int, typer.Option(help="Explain the k most likely classes.")] = 1,
    alpha: Annotated[float, typer.Option(help="Heatmap opacity, 0 to 1.")] = 0.5,
    colormap: Annotated[
        str, typer.Option(help="jet, turbo, viridis, inferno, magma, gray.")
    ] = "jet",
    image_format: Annotated[str, typer.Option("--format", help="png, jpeg or webp.")] = "png",
    heatmaps: Annotated[bool, typer.Option(help="Also write 8-bit grayscale heatmaps.")] = False,
    summary: Annotated[
        Path | None, typer.Option(help="Write a summary (.json, or .csv) of every file.")
    ] = None,
    batch_size: BatchSizeOption = 8,
    device: DeviceOption = "auto",
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
) -> None:
    """Write CAM overlays (and optionally heatmaps and a summary) for images and folders."""
    files = find_images(inputs)
    if not files:
        raise fail("no image files found in the given paths")
    options = ExplainOptions(
        method=method,
        layer=layer,
        target=target,
        top_k=top_k,
        alpha=alpha,
        colormap=colormap,
        format=image_format,
        heatmaps=heatmaps,
        batch_size=batch_size,
    )
    try:
        spec = choose_spec(models_dir, model, architecture, weights, layer)
        engine = CamEngine.from_loaded(load_model(spec), device=device)
        results = _run_with_progress(engine, files, output, options)
    except CamserveError as error:
        raise fail(str(error)) from error
    if summary is not None:
        write_summary(results, summary)
    failed = [r for r in results if r.error]
    for result in failed:
        console.print(
            f"[yellow]skipped[/] {result.source}: {result.error}", highlight=False, soft_wrap=True
        )
    console.print(f"explained {len(results) - len(failed)} of {len(results)} images into {output}")


def _run_with_progress(
    engine: CamEngine, files: list[InputFile], output: Path, options: ExplainOptions
) -> list[FileResult]:
    with progress_bar("explaining") as progress:
        task = progress.add_task("explaining", total=len(files))
        return explain_files(
            engine, files, output, options, on_done=lambda _r: progress.advance(task)
        )
