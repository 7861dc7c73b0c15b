"""Help that names every value the way a person reads it: ``PATH``, ``INTEGER``, ``INPUTS...``,
``[largest|all]``, nothing after a flag, instead of Typer's own type names (``<path>``,
``<int>``, ``<list[Path]>``, ``{inputs}...`` and ``<bool>`` after every flag, ``--help``
included)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import typer
from typer._click import Context, HelpFormatter  # the types of the methods overridden below
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from camserve.cli.help_layout import ReadableHelpContext, write_command_list, write_plain_help

__all__ = ["ReadableCommand", "ReadableGroup", "readable_metavar", "use_readable_help"]

TYPE_NAMES: dict[object, str] = {str: "TEXT", int: "INTEGER", float: "FLOAT", Path: "PATH"}


def readable_metavar(param: TyperArgument | TyperOption) -> str:
    """What the help shows for ``param``'s value: empty for a flag, its choices, else a type
    name (an argument: its own name); ``...`` after one that takes several."""
    if isinstance(param, TyperOption) and param.is_flag:
        return ""
    descriptor = param.type_descriptor
    if descriptor.is_choice and descriptor.choices is not None:
        choices = (c.value if isinstance(c, Enum) else c for c in descriptor.choices)
        return "[" + "|".join(map(str, choices)) + "]"
    if isinstance(param, TyperArgument):
        name = (param.name or "value").upper()
    else:
        element: Any = descriptor.annotation
        name = TYPE_NAMES.get(element, getattr(element, "__name__", "VALUE").upper())
    return name + ("..." if param.nargs != 1 or descriptor.is_list else "")


class _NamedArgument(TyperArgument):
    """An argument shown by its metavar alone, in the usage line as in the table."""

    def display_type_rich(self, ctx: Context) -> str | None:
        return None

    def get_usage_pieces(self, ctx: Context) -> list[str]:
        name = self.metavar or readable_metavar(self)
        return [name if self.required else f"[{name}]"]


def _name_values(params: list[Any]) -> None:
    for param in params:
        if isinstance(param, TyperArgument | TyperOption) and param.metavar is None:
            param.metavar = readable_metavar(param)
        if type(param) is TyperArgument:
            param.__class__ = _NamedArgument


class ReadableCommand(TyperCommand):
    """A command whose help names values as ``readable_metavar`` says, laid out as
    ``help_layout`` does."""

    context_class = ReadableHelpContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _name_values(self.params)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        write_plain_help(self, ctx, formatter)

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        return _flag_shown_bare(super().get_help_option(ctx))


class ReadableGroup(TyperGroup):
    """The command group, whose own ``--help`` is shown without a type, laid out as
    ``help_layout`` does."""

    context_class = ReadableHelpContext

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        write_plain_help(self, ctx, formatter)

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        write_command_list(self, ctx, formatter)

    def get_help_option(self, ctx: Context) -> TyperOption | None:
        return _flag_shown_bare(super().get_help_option(ctx))


def _flag_shown_bare(option: TyperOption | None) -> TyperOption | None:
    if option is not None:
        option.metavar = ""
    return option


def use_readable_help(app: typer.Typer) -> None:
    """Make every command registered on ``app`` so far with Typer's own class a
    ``ReadableCommand``."""
    for command in app.registered_commands:
        if command.cls in (None, TyperCommand):
            command.cls = ReadableCommand
