"""The ``camserve`` Typer app, whose group imports a command's module only when it runs.

Most commands import torch, and some timm, Ray or FastAPI, at their top: seconds before anything
is printed. Imported all at start, they made even ``camserve models``, which only reads the
manifests, wait for all of them. ``COMMAND_MODULES`` names each command's module; the group
imports it on first use, and only the list of ``camserve --help`` imports them all (it shows
each command's first sentence). Three commands live in the lab's distribution (camserve-lab,
``lab/`` in the repository): camserve names their modules but never imports the lab otherwise,
and says how to install it when it is missing (``missing_extras``).
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches
from typing import Annotated, Any

import typer
from typer._click import Command, Context  # what Typer's commands are built on
from typer._click.exceptions import UsageError
from typer.main import get_command_from_info, get_command_name
from typer.models import CommandInfo

import camserve
from camserve import SUMMARY
from camserve.cli.help_names import ReadableGroup, use_readable_help
from camserve.cli.missing_extras import command_needing_extra, refusal

__all__ = ["COMMAND_MODULES", "LazyCommandGroup", "cli"]

COMMAND_MODULES: dict[str, str] = {
    "audit": "camserve.cli.audit",
    "cvat-function": "camserve.cli.cvat",
    "dataset-cvat": "camserve.cli.dataset_cvat",
    "dataset-fiftyone": "camserve.cli.dataset_fiftyone",
    "dataset-labelstudio": "camserve.cli.dataset_labelstudio",
    "eval": "camserve_lab.cli.evaluate",
    "explain": "camserve.cli.explain",
    "explain-dataset": "camserve.cli.explain_dataset",
    "export-fiftyone": "camserve.cli.export_fiftyone",
    "fetch-weights": "camserve.cli.fetch",
    "models": "camserve.cli.models",
    "serve": "camserve.cli.serve",
    "train-demo": "camserve_lab.cli.train",
    "train-dense": "camserve_lab.cli.train_dense",
}
"""Each command, and the module that registers it on the Typer app: one of ``camserve.cli``, or
of the lab's ``camserve_lab.cli``."""


class LazyCommandGroup(ReadableGroup):
    """Lists every command of ``COMMAND_MODULES`` and builds each when it is first asked for."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Typer hands over the commands registered so far; each is built again on first use,
        # the same way whether its module was imported before or is imported then.
        super().__init__(*args, **{**kwargs, "commands": {}})

    def list_commands(self, ctx: Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in self.commands and cmd_name in COMMAND_MODULES:
            self.add_command(_built(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: Context) -> Any:
        """Run the command; one whose run needs a package of a missing extra is refused with
        the extra's ``pip install`` line (``missing_extras.refusal``), as is one whose module
        needs it at its top, instead of a traceback."""
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as missing:
            raise refusal(ctx.invoked_subcommand or "", missing) from missing

    def resolve_command(
        self, ctx: Context, args: list[str]
    ) -> tuple[str | None, Command | None, list[str]]:
        """Typer's, with the closest command suggested among all, not only those built yet."""
        try:
            return super().resolve_command(ctx, args)
        except UsageError as error:
            closest = get_close_matches(args[0], list(COMMAND_MODULES)) if args else []
            if closest and "Did you mean" not in error.message:
                suggestions = ", ".join(repr(name) for name in closest)
                error.message = f"{error.message.rstrip('.')}. Did you mean {suggestions}?"
            raise


cli = typer.Typer(
    cls=LazyCommandGroup,
    help=SUMMARY,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
"""The app every command module registers on (through ``camserve.cli.common``)."""


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"camserve {camserve.__version__}")
        raise typer.Exit


@cli.callback()
def camserve_options(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print camserve's version and exit.",
        ),
    ] = False,
) -> None:
    # The callback also makes Typer build a group however many commands are registered yet
    # (LazyCommandGroup registers each on first use).
    del version


def _built(name: str) -> Command:
    """Import ``name``'s module, which registers the command on ``cli``, and build it (a
    stand-in naming the extra to install when the module needs one)."""
    try:
        importlib.import_module(COMMAND_MODULES[name])
    except ModuleNotFoundError as missing:
        return command_needing_extra(name, missing)
    use_readable_help(cli)
    info = next(info for info in cli.registered_commands if _name_of(info) == name)
    return get_command_from_info(
        info,
        pretty_exceptions_short=cli.pretty_exceptions_short,
        rich_markup_mode=cli.rich_markup_mode,
    )


def _name_of(info: CommandInfo) -> str:
    """The command's name: as registered, else its function's, as Typer derives it."""
    if info.name:
        return info.name
    callback = info.callback
    return get_command_name(callback.__name__ if callback is not None else "")
