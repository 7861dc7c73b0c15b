"""A command whose module needs a package that an optional extra installs: listed by
``camserve --help`` with what to install, and refused with that hint when it runs.

``pip install camserve`` brings what serving needs; the scene generators of ``camserve eval``,
``train-demo`` and ``train-dense`` paint with scikit-image's photos (the ``quality`` extra), and
``explain-dataset --ray`` runs on Ray (the ``dataset`` extra)."""

from __future__ import annotations

import typer
from typer.core import TyperCommand

__all__ = ["EXTRA_OF_MODULE", "command_needing_extra"]

EXTRA_OF_MODULE = {
    "skimage": "quality",
    "ray": "dataset",
    "pyarrow": "dataset",
    "transformers": "huggingface",
}
"""The top-level module a command may miss, and camserve's extra that installs it."""


def command_needing_extra(name: str, missing: ModuleNotFoundError) -> TyperCommand:
    """A stand-in for command ``name``, whose module could not import ``missing.name``: its
    help names the extra, and running it says so and exits with 2. A module missing for any
    other reason is an error of the installation, raised as it is."""
    module = (missing.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        raise missing
    hint = f"needs {module}: pip install 'camserve[{extra}]'"

    def refuse(**_: object) -> None:
        typer.echo(f"camserve {name} {hint}", err=True)
        raise typer.Exit(2)

    return TyperCommand(
        name,
        help=f"(Not installed: {hint}.)",
        callback=refuse,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
