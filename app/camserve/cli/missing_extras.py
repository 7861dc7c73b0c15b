"""A command that needs a package an optional extra installs is refused with the ``pip install``
line of that extra, one line on stderr and exit status 2, whether its module imports the package
at its top (then ``camserve --help`` lists the command with the hint too) or only once it runs.

``pip install camserve`` brings what serving needs; ``explain-dataset`` and the ``dataset-*``
exports read and write Parquet with pyarrow, and run on Ray (the ``dataset`` extra).
``camserve eval``, ``train-demo`` and ``train-dense`` are the lab's: their modules are in
camserve-lab (``lab/`` in camserve's repository, which the server's wheel does not carry), and
its scene generators paint with scikit-image's photos."""

from __future__ import annotations

import typer
from typer.core import TyperCommand

__all__ = [
    "EXTRA_OF_MODULE",
    "INSTALL_OF_MODULE",
    "LAB_INSTALL",
    "command_needing_extra",
    "extra_hint",
    "refusal",
]

EXTRA_OF_MODULE = {
    "ray": "dataset",
    "pyarrow": "dataset",
    "transformers": "huggingface",
}
"""The top-level module a command may miss, and camserve's extra that installs it."""
LAB_INSTALL = "pip install ./lab (camserve-lab, in camserve's repository)"
"""How the lab's commands are installed: its distribution, beside camserve."""
INSTALL_OF_MODULE = {
    **{module: f"pip install 'camserve[{extra}]'" for module, extra in EXTRA_OF_MODULE.items()},
    "camserve_lab": LAB_INSTALL,
    "skimage": LAB_INSTALL,
}
"""The top-level module a command may miss, and the ``pip install`` line that brings it."""


def extra_hint(missing: ModuleNotFoundError) -> str:
    """What to install for ``missing``: ``needs MODULE: pip install ...``. A module that
    nothing of ``INSTALL_OF_MODULE`` installs is an error of the installation, raised as it
    is."""
    module = (missing.name or "").split(".")[0]
    install = INSTALL_OF_MODULE.get(module)
    if install is None:
        raise missing
    return f"needs {module}: {install}"


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
