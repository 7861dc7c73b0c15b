"""The ``camserve`` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from app.batch import (
    ExplainOptions,
    FileResult,
    InputFile,
    explain_files,
    find_images,
    write_summary,
)
from app.config import load_settings
from app.engine.engine import CamEngine
from app.engine.errors import CamserveError
from app.engine.manifest import ModelSpec, load_manifests
from app.engine.registry import load_model
from app.model_store import DEFAULT_MODELS_DIR, find_spec, spec_for_architecture
from app.server import run_server

__all__ = ["cli", "main"]

cli = typer.Typer(
    help="CAM / Grad-CAM explanations of image classifiers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)

ModelsDir = Annotated[
    Path,
    typer.Option("--models-dir", envvar="CAMSERVE_MODELS_DIR", help="Folder of model manifests."),
]


def _fail(message: str) -> typer.Exit:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    return typer.Exit(code=1)


def _choose_spec(
    models_dir: Path, model: str | None, architecture: str | None, weights: str, layer: str | None
) -> ModelSpec:
    if architecture is not None:
        return spec_for_architecture(architecture, weights, layer)
    if model is not None:
        return find_spec(models_dir, model)
    specs = load_manifests(models_dir)
    if not specs:
        raise CamserveError(f"no model manifests in {models_dir}; pass --architecture")
    return specs[0]


@cli.command()
def explain(
    inputs: Annotated[list[Path], typer.Argument(help="Image files or folders (recursive).")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the results.")],
    model: Annotated[str | None, typer.Option(help="Model name from the models folder.")] = None,
    architecture: Annotated[
        str | None, typer.Option(help="A torchvision architecture instead of a manifest.")
    ] = None,
    weights: Annotated[
        str, typer.Option(help="With --architecture: weights name, 'random' or a checkpoint.")
    ] = "DEFAULT",
    method: Annotated[str, typer.Option(help="CAM method.")] = "gradcam",
    layer: Annotated[str | None, typer.Option(help="Target layer (dotted name).")] = None,
    target: Annotated[
        str | None, typer.Option(help="Class index or label to explain (default: top-1).")
    ] = None,
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
    batch_size: Annotated[int, typer.Option(min=1, help="Images per engine call.")] = 8,
    device: Annotated[
        str, typer.Option(envvar="CAMSERVE_DEVICE", help="auto, cpu, cuda.")
    ] = "auto",
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
) -> None:
    """Write CAM overlays (and optionally heatmaps and a summary) for images and folders."""
    files = find_images(inputs)
    if not files:
        raise _fail("no image files found in the given paths")
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
        spec = _choose_spec(models_dir, model, architecture, weights, layer)
        engine = CamEngine.from_loaded(load_model(spec), device=device)
        results = _run_with_progress(engine, files, output, options)
    except CamserveError as error:
        raise _fail(str(error)) from error
    if summary is not None:
        write_summary(results, summary)
    failed = [r for r in results if r.error]
    for result in failed:
        console.print(f"[yellow]skipped[/] {result.source}: {result.error}", highlight=False)
    console.print(f"explained {len(results) - len(failed)} of {len(results)} images into {output}")


def _run_with_progress(
    engine: CamEngine, files: list[InputFile], output: Path, options: ExplainOptions
) -> list[FileResult]:
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("explaining", total=len(files))
        return explain_files(
            engine, files, output, options, on_done=lambda _r: progress.advance(task)
        )


@cli.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Interface (CAMSERVE_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (CAMSERVE_PORT).")] = None,
    models_dir: Annotated[
        Path | None, typer.Option("--models-dir", help="Manifests folder (CAMSERVE_MODELS_DIR).")
    ] = None,
    models: Annotated[
        str | None, typer.Option(help="Comma-separated models to serve (CAMSERVE_MODELS).")
    ] = None,
    device: Annotated[str | None, typer.Option(help="auto, cpu, cuda (CAMSERVE_DEVICE).")] = None,
    autocast: Annotated[
        str | None, typer.Option(help="none, bf16, fp16 on CUDA (CAMSERVE_AUTOCAST).")
    ] = None,
    max_batch_size: Annotated[
        int | None, typer.Option(help="Images per batch (CAMSERVE_MAX_BATCH_SIZE).")
    ] = None,
    max_wait_ms: Annotated[
        float | None, typer.Option(help="Batch fill wait (CAMSERVE_MAX_WAIT_MS).")
    ] = None,
    queue_size: Annotated[
        int | None, typer.Option(help="Queue bound (CAMSERVE_QUEUE_SIZE).")
    ] = None,
    log_level: Annotated[
        str | None, typer.Option(help="debug, info, warning, error (CAMSERVE_LOG_LEVEL).")
    ] = None,
) -> None:
    """Run the HTTP service. Flags override the CAMSERVE_* environment variables."""
    try:
        settings = load_settings(
            host=host,
            port=port,
            models_dir=models_dir,
            models=models,
            device=device,
            autocast=autocast,
            max_batch_size=max_batch_size,
            max_wait_ms=max_wait_ms,
            queue_size=queue_size,
            log_level=log_level,
        )
    except ValidationError as error:
        raise _fail(f"invalid setting: {error}") from error
    try:
        run_server(settings)
    except CamserveError as error:
        raise _fail(str(error)) from error


@cli.command("models")
def list_models(models_dir: ModelsDir = DEFAULT_MODELS_DIR) -> None:
    """List the models in the models folder with their target layers and weights."""
    try:
        specs = load_manifests(models_dir)
    except CamserveError as error:
        raise _fail(str(error)) from error
    table = Table("name", "architecture", "weights", "layer", "input size", "description")
    for spec in specs:
        table.add_row(
            spec.name,
            spec.architecture,
            spec.weights,
            spec.layer or "(family default)",
            "×".join(map(str, spec.input_size)),
            spec.description,
        )
    Console().print(table)


def main() -> None:
    cli()
