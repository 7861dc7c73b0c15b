"""``camserve explain``: overlays for files and folders."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import typer

from camserve.cli.common import (
    ArchitectureOption,
    DeviceOption,
    LayerOption,
    ModelOption,
    ModelsDir,
    TargetOption,
    WeightsOption,
    cli,
    console,
    fail,
    load_chosen_model,
    progress_bar,
    report_ignored,
)
from camserve.cli.folder_explainer import ExplainOptions, FileResult, explain_files, write_summary
from camserve.cli.remote_explainer import explain_remotely
from camserve.config import DEFAULT_MODELS_DIR
from camserve.dataset.explained import with_model_defaults
from camserve.engine.engine import CamEngine
from camserve.engine.errors import CamserveError
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.images.image_files import InputFile, find_images
from camserve_client import CamserveError as ClientError
from camserve_client import Client

__all__ = ["explain", "with_model_defaults"]

GPU_BATCH_SIZE = 8
"""Images per engine call on a GPU; on the CPU one at a time, so the progress bar moves with
every image (batching gains little there)."""


@cli.command()
def explain(
    inputs: Annotated[
        list[Path], typer.Argument(metavar="IMAGE...", help="Image files or folders (recursive).")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Folder for the results.")],
    model: ModelOption = None,
    architecture: ArchitectureOption = None,
    weights: WeightsOption = "DEFAULT",
    method: Annotated[
        str | None,
        typer.Option(
            help="CAM method, or several separated by commas (gradcam,layercam); default: the "
            "model's own (its manifest's method, else gradcam), as for a request to the server."
        ),
    ] = None,
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
    batch_size: Annotated[
        int | None,
        typer.Option(min=1, help="Images per engine call (default: 1 on the CPU, 8 on a GPU)."),
    ] = None,
    device: DeviceOption = "auto",
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
    server: Annotated[
        str | None,
        typer.Option(
            help="A running camserve (http://host:8000) to explain through, instead "
            "of loading the model here; --model names one of its models."
        ),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(envvar="CAMSERVE_API_KEY", help="With --server: its API key.")
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="With --server: requests in flight at once.")
    ] = 4,
) -> None:
    """Write CAM overlays (and optionally heatmaps and a summary) for images and folders.

    Exits with 1 when an input is missing or any file was skipped (the summary says which)."""
    files = find_images(inputs)
    report_ignored(inputs)
    if not files:
        raise fail("no image files found in the given paths")
    methods = tuple(dict.fromkeys(n.strip() for n in (method or "").split(",") if n.strip()))
    if method is not None and not methods:
        raise fail("--method names no method")
    options = ExplainOptions(
        methods=methods,
        layer=layer,
        target=target,
        top_k=top_k,
        alpha=alpha,
        colormap=colormap,
        format=image_format,
        heatmaps=heatmaps,
        batch_size=batch_size or 1,
    )
    if server is not None:
        if architecture is not None:
            raise fail("--server explains with the server's models; name one with --model")
        results = _run_remotely(Server(server, api_key, model, concurrency), files, output, options)
    else:
        results = _run_locally(
            models_dir, (model, architecture, weights), device, files, output, options, batch_size
        )
    if summary is not None:
        write_summary(results, summary)
    failed = [r for r in results if r.error]
    for result in failed:
        console.print(
            f"[yellow]skipped[/] {result.source}: {result.error}", highlight=False, soft_wrap=True
        )
    console.print(f"explained {len(results) - len(failed)} of {len(results)} images into {output}")
    if failed:
        raise fail(f"{len(failed)} of {len(results)} files skipped (listed above)")


@dataclass(frozen=True)
class Server:
    """Where ``--server`` sends the files, and how."""

    url: str
    api_key: str | None
    model: str | None
    concurrency: int


def _run_locally(
    models_dir: Path,
    chosen: tuple[str | None, str | None, str],
    device: str,
    files: list[InputFile],
    output: Path,
    options: ExplainOptions,
    batch_size: int | None,
) -> list[FileResult]:
    """Load the model (``chosen``: --model, --architecture, --weights) and explain here."""
    model, architecture, weights = chosen
    try:
        layer = None if options.layer == FUSED_LAYER else options.layer
        loaded = load_chosen_model(models_dir, model, architecture, weights, layer)
        engine = CamEngine.from_loaded(loaded, device=device)
        options = with_model_defaults(options, loaded)
        if batch_size is None and engine.device.type != "cpu":
            options = replace(options, batch_size=GPU_BATCH_SIZE)
        return _run_with_progress(engine, files, output, options)
    except CamserveError as error:
        raise fail(str(error)) from error


def _run_remotely(
    server: Server, files: list[InputFile], output: Path, options: ExplainOptions
) -> list[FileResult]:
    """Send the files to ``server`` and write its answers as a local run would."""
    try:
        with Client(server.url, server.api_key) as client, progress_bar("explaining") as bar:
            task = bar.add_task("explaining", total=len(files))
            return explain_remotely(
                client,
                files,
                output,
                options,
                model=server.model,
                concurrency=server.concurrency,
                on_done=lambda _r: bar.advance(task),
            )
    except ClientError as error:
        raise fail(f"{server.url}: {error}") from error


def _run_with_progress(
    engine: CamEngine, files: list[InputFile], output: Path, options: ExplainOptions
) -> list[FileResult]:
    with progress_bar("explaining") as progress:
        task = progress.add_task("explaining", total=len(files))
        progress.refresh()
        return explain_files(
            engine, files, output, options, on_done=lambda _r: progress.advance(task)
        )
