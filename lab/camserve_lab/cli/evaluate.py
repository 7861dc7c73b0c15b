"""``camserve eval``: localization and faithfulness of CAM methods on a dataset."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from camserve.cli.common import (
    ArchitectureOption,
    DeviceOption,
    ModelOption,
    ModelsDir,
    WeightsOption,
    choose_spec,
    cli,
    console,
    fail,
    progress_bar,
    require_classifier,
)
from camserve.config import DEFAULT_MODELS_DIR
from camserve.engine.engine import CamEngine
from camserve.engine.errors import CamserveError
from camserve.engine.methods import METHODS, get_method
from camserve.engine.models.registry import load_model
from camserve.quality.datasets import (
    EvalSample,
    samples_from_folder,
)
from camserve.quality.evaluate import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_CURVE_STEPS,
    DEFAULT_THRESHOLD,
    MethodScores,
    NotApplicable,
    evaluate,
)
from camserve_lab.report import (
    markdown_table,
    write_report,
)
from camserve_lab.scene_samples import samples_from_scenes
from camserve_lab.scenes import SHAPES
from camserve_lab.training import HELD_OUT_SEED

__all__ = ["eval_command"]


@cli.command("eval")
def eval_command(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for results.md, .csv and .png.")
    ],
    images: Annotated[
        Path | None,
        typer.Argument(help="Folder of images (recursive); or use --scenes.", show_default=False),
    ] = None,
    model: ModelOption = None,
    architecture: ArchitectureOption = None,
    weights: WeightsOption = "DEFAULT",
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
    device: DeviceOption = "auto",
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
) -> None:
    """Score CAM methods on a folder of images (with optional boxes) or on generated scenes.

    Localisation and faithfulness metrics per method and layer, written to --output.
    """
    if (images is None) == (scenes is None):
        raise fail("give either a folder of images or --scenes N")
    if boxes is not None and images is None:
        raise fail("--boxes goes with a folder of images")
    notes: list[str] = []
    try:
        spec = choose_spec(models_dir, model, architecture, weights, None)
        require_classifier(spec, "eval")
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
        raise fail(str(error)) from error
    if not rows:
        raise fail("none of the methods applies to the chosen layers")
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
    with progress_bar("evaluating") as progress:
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
