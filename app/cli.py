"""The ``camserve`` command line."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace
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
from app.engine.methods import METHODS, get_method
from app.engine.registry import load_model
from app.model_store import DEFAULT_MODELS_DIR, find_spec, spec_for_architecture
from app.quality.datasets import (
    EvalSample,
    samples_from_folder,
    samples_from_scenes,
)
from app.quality.evaluate import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CURVE_STEPS,
    DEFAULT_THRESHOLD,
    MethodScores,
    NotApplicable,
    evaluate,
)
from app.quality.report import (
    markdown_table,
    write_report,
)
from app.quality.scenes import DEFAULT_SIZE, SHAPES
from app.quality.training import HELD_OUT_SEED, TrainingConfig, train_demo, write_demo_model
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
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
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
        console.print(
            f"[yellow]skipped[/] {result.source}: {result.error}", highlight=False, soft_wrap=True
        )
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


@cli.command("train-demo")
def train_demo_command(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for the checkpoint and manifest.")
    ] = DEFAULT_MODELS_DIR,
    small_steps: Annotated[
        int, typer.Option(min=0, help="Steps on 64-pixel scenes (fast; the shapes are learned).")
    ] = TrainingConfig.phases[0][1],
    full_steps: Annotated[
        int, typer.Option(min=1, help="Steps on 128-pixel scenes, the size the model serves at.")
    ] = TrainingConfig.phases[1][1],
    batch_size: Annotated[int, typer.Option(min=1, help="Scenes per step.")] = (
        TrainingConfig.batch_size
    ),
    seed: Annotated[int, typer.Option(help="Seed of the initialisation.")] = TrainingConfig.seed,
) -> None:
    """Train the demo model on generated scenes and write it (with its manifest) to --output."""
    phases = (
        ((64, small_steps), (DEFAULT_SIZE, full_steps))
        if small_steps
        else ((DEFAULT_SIZE, full_steps),)
    )
    config = TrainingConfig(phases=phases, batch_size=batch_size, seed=seed)
    columns = (
        TextColumn("training"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]:.3f}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("train", total=config.steps, loss=float("nan"))
        model, report = train_demo(
            config, on_step=lambda _step, loss: progress.update(task, advance=1, loss=loss)
        )
    manifest = write_demo_model(model, report, output)
    console.print(
        f"held-out accuracy {report.accuracy:.2%} on {config.held_out_images} scenes, "
        f"{report.seconds:.0f} s; wrote {manifest}"
    )


@cli.command("eval")
def eval_command(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for results.md, .csv and .png.")
    ],
    images: Annotated[
        Path | None,
        typer.Argument(help="Folder of images (recursive); or use --scenes.", show_default=False),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name from the models folder.")] = None,
    architecture: Annotated[
        str | None, typer.Option(help="A torchvision architecture instead of a manifest.")
    ] = None,
    weights: Annotated[
        str, typer.Option(help="With --architecture: weights name, 'random' or a checkpoint.")
    ] = "DEFAULT",
    boxes: Annotated[
        Path | None,
        typer.Option(help="Boxes of the folder's images: CSV (file,x0,y0,x1,y1[,label]) or COCO."),
    ] = None,
    scenes: Annotated[
        int | None, typer.Option(min=1, help="Evaluate on this many generated scenes instead.")
    ] = None,
    scene_seed: Annotated[
        int, typer.Option(help="Scene seed; the default is the demo model's held-out set.")
    ] = HELD_OUT_SEED,
    methods: Annotated[
        str | None, typer.Option(help="Comma-separated CAM methods (default: every one).")
    ] = None,
    layers: Annotated[
        str | None, typer.Option(help="Comma-separated target layers (default: the model's).")
    ] = None,
    threshold: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Map threshold for IoU, fraction of the peak.")
    ] = DEFAULT_THRESHOLD,
    curve_steps: Annotated[
        int, typer.Option(min=2, help="Points on each deletion / insertion curve.")
    ] = DEFAULT_CURVE_STEPS,
    batch_size: Annotated[int, typer.Option(min=1, help="Images per engine call.")] = (
        DEFAULT_BATCH_SIZE
    ),
    device: Annotated[
        str, typer.Option(envvar="CAMSERVE_DEVICE", help="auto, cpu, cuda.")
    ] = "auto",
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
) -> None:
    """Score CAM methods on a folder of images (with optional boxes) or on generated scenes.

    Localisation and faithfulness metrics per method and layer, written to --output.
    """
    if (images is None) == (scenes is None):
        raise _fail("give either a folder of images or --scenes N")
    if boxes is not None and images is None:
        raise _fail("--boxes goes with a folder of images")
    notes: list[str] = []
    try:
        spec = _choose_spec(models_dir, model, architecture, weights, None)
        engine = CamEngine.from_loaded(load_model(spec), device=device)
        method_names = _eval_methods(methods)
        layer_names = _eval_layers(engine, layers)
        if images is not None:
            samples, dataset = _folder_samples(engine, images, boxes), f"the images in {images}"
        else:
            assert scenes is not None  # one of the two, checked above
            samples = _scene_samples(engine, scene_seed, scenes, notes)
            dataset = f"{scenes} generated scenes (seed {scene_seed})"
        rows = _evaluate_with_progress(
            engine,
            samples,
            method_names,
            layer_names,
            lambda skipped: notes.append(_not_applicable_note(skipped)),
            threshold=threshold,
            curve_steps=curve_steps,
            batch_size=batch_size,
        )
    except CamserveError as error:
        raise _fail(str(error)) from error
    if not rows:
        raise _fail("none of the methods applies to the chosen layers")
    model_args = (
        ["--architecture", spec.architecture, "--weights", weights]
        if architecture is not None
        else ["--model", spec.name, "--models-dir", str(models_dir)]
    )
    source = (
        [str(images), *(["--boxes", str(boxes)] if boxes is not None else [])]
        if images is not None
        else ["--scenes", str(scenes), "--scene-seed", str(scene_seed)]
    )
    command = shlex.join(
        [
            *("camserve", "eval", *source, *model_args),
            *("--methods", ",".join(method_names), "--layers", ",".join(layer_names)),
            *("--threshold", f"{threshold:g}", "--curve-steps", str(curve_steps)),
            *("--output", str(output)),
        ]
    )
    paths = write_report(
        rows, output, title=f"{spec.name} on {dataset}", command=command, notes=notes
    )
    typer.echo(markdown_table(rows))
    console.print(f"wrote {', '.join(str(path) for path in paths.values())}", highlight=False)


def _split_names(text: str | None) -> list[str]:
    names = [name.strip() for name in (text or "").split(",")]
    return list(dict.fromkeys(name for name in names if name))


def _eval_methods(text: str | None) -> list[str]:
    """The requested methods under their canonical names; every method by default."""
    names = _split_names(text)
    if not names:
        return list(METHODS)
    return list(dict.fromkeys(get_method(name).name for name in names))


def _eval_layers(engine: CamEngine, text: str | None) -> list[str]:
    """The requested layers, each checked to exist; the model's default layer by default."""
    names = _split_names(text) or [engine.layer]
    for name in names:
        engine.layer_module(name)
    return names


def _folder_samples(engine: CamEngine, folder: Path, boxes: Path | None) -> list[EvalSample]:
    samples, skipped = samples_from_folder(folder, boxes, engine.class_index)
    for file in skipped:
        console.print(f"[yellow]skipped[/] {file.path}: {file.reason}", highlight=False)
    if not samples:
        raise CamserveError(f"no readable images in {folder}")
    return samples


def _scene_samples(engine: CamEngine, seed: int, count: int, notes: list[str]) -> list[EvalSample]:
    """Generated scenes, labelled with the model's classes for their shapes where its labels name
    every shape; otherwise each scene explains the model's top prediction."""
    known = {label.casefold() for label in engine.labels or []}
    if all(shape in known for shape in SHAPES):
        return samples_from_scenes(seed, count, engine.class_index)
    note = "the model's labels do not name the scene shapes; each scene explains its top prediction"
    console.print(f"[yellow]note[/] {note}", highlight=False)
    notes.append(note)
    return [replace(sample, label=None) for sample in samples_from_scenes(seed, count)]


def _not_applicable_note(skipped: NotApplicable) -> str:
    note = f"{skipped.method} on {skipped.layer} left out: {skipped.reason}"
    console.print(f"[yellow]note[/] {note}", highlight=False)
    return note


def _evaluate_with_progress(
    engine: CamEngine,
    samples: list[EvalSample],
    methods: list[str],
    layers: list[str],
    on_not_applicable: Callable[[NotApplicable], None],
    *,
    threshold: float,
    curve_steps: int,
    batch_size: int,
) -> list[MethodScores]:
    columns = (
        TextColumn("evaluating"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("evaluate", total=len(samples) * len(methods) * len(layers))
        return evaluate(
            engine,
            samples,
            methods,
            layers,
            threshold=threshold,
            curve_steps=curve_steps,
            batch_size=batch_size,
            on_progress=lambda images: progress.advance(task, images),
            on_not_applicable=on_not_applicable,
        )


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
