"""The shared Typer app and the helpers every command uses."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from camserve.cli.lazy_commands import cli
from camserve.engine.errors import CamserveError, ManifestError
from camserve.engine.images.image_files import not_images
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.manifest_folder import read_manifests
from camserve.engine.models.shipped import models_folder

if TYPE_CHECKING:
    from camserve.engine.models.registry import LoadedModel

__all__ = [
    "DatasetOutput",
    "ModelsDir",
    "choose_spec",
    "cli",
    "console",
    "fail",
    "load_chosen_model",
    "progress_bar",
    "report_ignored",
    "require_classifier",
]

console = Console(stderr=True)


ModelsDir = Annotated[
    Path,
    typer.Option(
        "--models-dir",
        envvar="CAMSERVE_MODELS_DIR",
        help="Folder of model manifests (default: ./models, else the shipped models).",
        callback=models_folder,
    ),
]


ModelOption = Annotated[str | None, typer.Option(help="Model name from the models folder.")]
ArchitectureOption = Annotated[
    str | None, typer.Option(help="A torchvision architecture instead of a manifest.")
]
WeightsOption = Annotated[
    str, typer.Option(help="With --architecture: weights name, 'random' or a checkpoint.")
]
LayerOption = Annotated[str | None, typer.Option(help="Target layer (dotted name).")]
TargetOption = Annotated[
    str | None, typer.Option(help="Class index or label to explain (default: top-1).")
]
BatchSizeOption = Annotated[int, typer.Option(min=1, help="Images per engine call.")]
DeviceOption = Annotated[str, typer.Option(envvar="CAMSERVE_DEVICE", help="auto, cpu, cuda.")]
"""Options shared by the commands that run the engine locally (explain, eval, export-fiftyone)."""
ScoreThresholdOption = Annotated[
    float, typer.Option(min=0.0, max=1.0, help="Detectors: keep the detections scoring above this.")
]
"""The detector option of explain-dataset, export-fiftyone and cvat-function (default
``DEFAULT_SCORE_THRESHOLD``)."""
DatasetOutput = Annotated[str, typer.Argument(help="The output folder of explain-dataset.")]
"""What the dataset-* export commands read."""


def fail(message: str) -> typer.Exit:
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code=1)


def choose_spec(
    models_dir: Path, model: str | None, architecture: str | None, weights: str, layer: str | None
) -> ModelSpec:
    from camserve.serving.served_models import find_spec  # noqa: PLC0415 - imports torch

    if architecture is not None:
        return ModelSpec(name=architecture, architecture=architecture, weights=weights, layer=layer)
    if model is not None:
        return find_spec(models_dir, model)
    folder = read_manifests(models_dir)
    if not folder.specs:
        reasons = f" ({folder.errors()})" if folder.broken else ""
        raise CamserveError(
            f"no usable model manifest in {models_dir}{reasons}; pass --architecture"
        )
    for entry in folder.broken:
        console.print(f"[yellow]skipped manifest[/] {entry.error}", highlight=False, soft_wrap=True)
    return folder.specs[0]


DENSE_COMMANDS = {
    "detection": (
        "detector",
        "`camserve explain-dataset` (Parquet rows) or `camserve export-fiftyone`",
    ),
    "segmentation": ("segmenter", "`camserve export-fiftyone`"),
}
"""What a detector and a segmenter are called, and the commands that explain their images."""


def require_classifier(spec: ModelSpec, command: str) -> None:
    """Refuse a detector or a segmenter in ``camserve COMMAND``, which explains classifiers,
    naming the commands that explain it."""
    # kind check: the commands every CLI module shares import no torch, which the adapters do
    if spec.task not in DENSE_COMMANDS:
        return
    kind, commands = DENSE_COMMANDS[spec.task]
    raise ManifestError(
        f"model {spec.name!r} is a {kind}, and `camserve {command}` explains classifiers; "
        f"explain a {kind}'s images with {commands}, or serve it with `camserve serve` "
        "(the page and /v1/explain)"
    )


def load_chosen_model(
    models_dir: Path, model: str | None, architecture: str | None, weights: str, layer: str | None
) -> LoadedModel:
    """The classifier asked for (a detector or segmenter refused, see ``require_classifier``);
    without --model or --architecture, the server's default (the first model in the folder
    that loads), named on stderr with the reasons for any skipped. For ``camserve explain``."""
    from camserve.engine.models.registry import load_model  # noqa: PLC0415 - imports torch
    from camserve.serving.served_models import first_loadable  # noqa: PLC0415 - imports torch

    if model is not None or architecture is not None:
        spec = choose_spec(models_dir, model, architecture, weights, layer)
        require_classifier(spec, "explain")
        return load_model(spec)
    loaded, failures = first_loadable(models_dir)
    for name, reason in failures.items():
        console.print(f"[yellow]skipped model[/] {name}: {reason}", highlight=False, soft_wrap=True)
    console.print(
        f"model: {loaded.name} (the default, as in the server: the first model in {models_dir} "
        "that loads; choose one with --model)",
        highlight=False,
        soft_wrap=True,
    )
    return loaded


def progress_bar(label: str, *extra: TextColumn, transient: bool = True) -> Progress:
    """A progress bar on stderr: label, bar, done/total, any ``extra`` columns, time left."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        *extra,
        TimeRemainingColumn(),
        console=console,
        transient=transient,
    )


def report_ignored(inputs: list[Path]) -> None:
    """Name the files in the given folders that are left out for not being images (by their
    suffix): a folder's other files are said, never skipped silently."""
    for file in not_images(inputs):
        console.print(
            f"[yellow]ignored[/] {file}: not an image file", highlight=False, soft_wrap=True
        )
