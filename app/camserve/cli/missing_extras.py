"""A command that needs a package an optional extra installs is refused with the ``pip install``
line of that extra, one line on stderr and exit status 2, whether its module imports the package
at its top (then ``camserve --help`` lists the command with the hint too) or only once it runs.

``pip install camserve`` brings what serving needs; the scene generators of ``camserve eval``,
``train-demo`` and ``train-dense`` paint with scikit-image's photos (the ``quality`` extra), and
``explain-dataset`` and the ``dataset-*`` exports read and write Parquet with pyarrow, and run on
Ray (the ``dataset`` extra)."""

from __future__ import annotations

import typer
from typer.core import TyperCommand

__all__ = ["EXTRA_OF_MODULE", "command_needing_extra", "extra_hint", "refusal"]

EXTRA_OF_MODULE = {
    "skimage": "quality",
    "ray": "dataset",
    "pyarrow": "dataset",
    "transformers": "huggingface",
}
"""The top-level module a command may miss, and camserve's extra that installs it."""


def extra_hint(missing: ModuleNotFoundError) -> str:
    """What to install for ``missing``: ``needs MODULE: pip install 'camserve[EXTRA]'``. A
    module that no extra installs is an error of the installation, raised as it is."""
    module = (missing.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        raise missing
    return f"needs {module}: pip install 'camserve[{extra}]'"


def refusal(name: str, missing: ModuleNotFoundError) -> typer.Exit:
    """Say that command ``name`` needs what ``missing`` names, and how to install it; the exit
    (status 2) to raise."""
    typer.echo(f"camserve {name} {extra_hint(missing)}", err=True)
    return typer.Exit(2)


def command_needing_extra(name: str, missing: ModuleNotFoundError) -> TyperCommand:
    """A stand-in for command ``name``, whose module could not import ``missing.name``: its
    help names the extra, and running it is refused as ``refusal`` says."""
    hint = extra_hint(missing)

    def refuse(**_: object) -> None:
        raise refusal(name, missing)

    return TyperCommand(
        name,
        help=f"(Not installed: {hint}.)",
        callback=refuse,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
