"""The ``camserve`` command line: one module per command, all on one Typer app, each imported
only when its command runs (``lazy_commands.py``)."""

from camserve.cli.common import cli

__all__ = ["cli", "main"]


def main() -> None:
    cli()
