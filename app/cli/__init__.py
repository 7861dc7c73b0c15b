"""The ``camserve`` command line: one module per command, all on one Typer app."""

from app.cli import (
    cvat,
    dataset_cvat,
    dataset_fiftyone,
    dataset_labelstudio,
    evaluate,
    explain,
    explain_dataset,
    export_fiftyone,
    fetch,
    models,
    serve,
    train,
    train_dense,
)
from app.cli.common import cli
from app.cli.help_names import use_readable_help

__all__ = ["cli", "main"]

_COMMANDS = (
    explain,
    explain_dataset,
    serve,
    fetch,
    train,
    train_dense,
    evaluate,
    models,
    cvat,
    export_fiftyone,
    dataset_labelstudio,
    dataset_cvat,
    dataset_fiftyone,
)
"""Imported for their side effect: each registers its command on ``cli``."""
use_readable_help(cli)


def main() -> None:
    cli()
