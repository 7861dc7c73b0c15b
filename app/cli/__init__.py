"""The ``camserve`` command line: one module per command, all on one Typer app."""

from app.cli import cvat, evaluate, explain, export_fiftyone, fetch, models, serve, train
from app.cli.common import cli

__all__ = ["cli", "main"]

_COMMANDS = (explain, serve, fetch, train, evaluate, models, cvat, export_fiftyone)
"""Imported for their side effect: each registers its command on ``cli``."""


def main() -> None:
    cli()
