"""``camserve models``: the manifests in the models folder.

One table when it fits the terminal; otherwise one block per model, so that no name, source
or weights status is ever cut to "…" (a table squeezed into 80 columns cut every cell). In a
block, a value too long for its line wraps at spaces and after path separators, so that a path
breaks only between its folders. Nothing here imports torch: listing reads the manifests and
looks for the weights files (``lazy_commands.py`` keeps the other commands' imports away)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from camserve.cli.common import ModelsDir, cli, fail
from camserve.cli.path_wrapping import wrap_at_separators
from camserve.engine.errors import CamserveError
from camserve.engine.models.manifest import DEFAULT_MODELS_DIR, ModelSpec
from camserve.engine.models.manifest_folder import read_manifests
from camserve.engine.models.shipped import describe_models_folder
from camserve.engine.models.weights_status import WeightsStatus, weights_status

__all__ = ["list_models"]

FIELDS = (
    "source",
    "architecture",
    "task",
    "weights",
    "weights status",
    "layer",
    "input size",
    "description",
)
"""What is shown of every model, after its name."""
UNLIMITED_WIDTH = 100_000
"""Room enough to measure the table with no cell wrapped."""
FIELD_COLUMN = max(len(field) for field in FIELDS) + 2
"""Where a block's values start: an indent, the longest field name, a space."""


@cli.command("models")
def list_models(
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
    architectures: Annotated[
        bool,
        typer.Option(
            "--architectures",
            help="List the architectures a manifest can name (source torchvision), by task.",
        ),
    ] = False,
) -> None:
    """List the models in the models folder (where it is, its target layer, its weights and
    whether they are here), and every manifest that cannot be read (then the exit status is 1)."""
    if architectures:
        _print_architectures(Console())
        return
    try:
        folder = read_manifests(models_dir).require_some()
    except CamserveError as error:
        raise fail(str(error)) from error
    specs = folder.specs
    statuses = [weights_status(spec) for spec in specs]
    rows = [
        (Text(spec.name), *_cells(spec, status))
        for spec, status in zip(specs, statuses, strict=True)
    ]
    output = Console()
    origin = describe_models_folder(models_dir)
    for line in wrap_at_separators(f"manifests from {origin}:", output.width):
        output.print(line, highlight=False, soft_wrap=True)
    if rows:
        output.print(_fitting(output, rows))
    for spec, status in zip(specs, statuses, strict=True):
        if not status.ready:
            output.print(f"{spec.name}: {status.detail}", highlight=False, soft_wrap=True)
    for entry in folder.broken:
        output.print(f"{entry.name}: not served: {entry.error}", highlight=False, soft_wrap=True)
    if folder.broken:
        raise typer.Exit(code=1)


def _cells(spec: ModelSpec, status: WeightsStatus) -> tuple[Text, ...]:
    """The model's values in the order of ``FIELDS``."""
    return (
        Text(spec.source),
        Text(spec.architecture),
        Text(spec.task),
        Text(spec.weights),
        Text(status.summary, style="green" if status.ready else "red"),
        Text(spec.layer or "(family default)"),
        Text("×".join(map(str, spec.input_size)) if spec.input_size else "(from the source)"),
        Text(spec.description),
    )


def _fitting(output: Console, rows: Sequence[tuple[Text, ...]]) -> RenderableType:
    """The table if every cell fits on the terminal unwrapped, else a block per model."""
    table = Table("name", *FIELDS)
    for row in rows:
        table.add_row(*row)
    unwrapped = output.measure(table, options=output.options.update_width(UNLIMITED_WIDTH))
    if unwrapped.maximum <= output.width:
        return table
    return Group(*(_block(row, output.width - FIELD_COLUMN) for row in rows))


def _block(row: tuple[Text, ...], value_width: int) -> RenderableType:
    """A model's name in bold, then one line per field; a long value goes on as many lines as
    it needs, broken at spaces and path separators (a part wider than the column folds)."""
    name, *values = row
    fields = Table.grid(padding=(0, 1))
    fields.add_column(no_wrap=True)
    fields.add_column(overflow="fold")
    for field, value in zip(FIELDS, values, strict=True):
        lines = wrap_at_separators(value.plain, value_width)
        fields.add_row(f" {field}", Text("\n".join(lines), style=value.style))
    return Group(Text(name.plain, style="bold", overflow="fold"), fields)


def _print_architectures(output: Console) -> None:
    """Each task's architectures, one task a paragraph, names wrapped at spaces."""
    from camserve.engine.models.dense import FAMILIES  # noqa: PLC0415 - imports torchvision
    from camserve.engine.models.registry import supported_architectures  # noqa: PLC0415

    tasks = {
        "classification": supported_architectures(),
        "detection": list(FAMILIES["detection"]),
        "segmentation": list(FAMILIES["segmentation"]),
    }
    for task, names in tasks.items():
        output.print(f'task = "{task}" (source = "torchvision"):', highlight=False)
        for line in textwrap.wrap(", ".join(names), max(output.width - 2, 20)):
            output.print(f"  {line}", highlight=False, soft_wrap=True)
    output.print(
        'source = "timm" or "huggingface": any model name the library knows (docs/models.md)',
        highlight=False,
        soft_wrap=True,
    )
