"""What ``make serve`` (or ``pip install camserve``) installs, found from this environment.

``make serve`` runs ``pip install -c constraints.txt -e ./client -e .``: camserve's base
dependencies and the client's, and what they require in turn, nothing of the extras or of the
development set. ``serve_distributions`` walks those requirements through the installed
distributions' metadata; ``modules_outside_the_serve_install`` names the top-level modules that
only other distributions give (pytest, ray, the extras' packages, the lab), and
``write_sitecustomize`` writes a ``sitecustomize.py`` that makes importing any of them fail, in a
process and in every process it starts, as in a plain serve install.
"""

from __future__ import annotations

import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

__all__ = [
    "modules_outside_the_serve_install",
    "serve_distributions",
    "serve_requirements",
    "write_sitecustomize",
]

ROOT = Path(__file__).resolve().parents[1]
VENV_SEEDS = ("pip", "setuptools")
"""What ``python -m venv`` puts in every environment before ``make serve`` installs anything."""
OWN = ("camserve", "camserve-client")
LAB = "camserve_lab"
"""The lab's package: never part of the serve install, whether camserve-lab is installed here
(``make test``) or only on the path."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def serve_requirements() -> list[Requirement]:
    """camserve's and its client's base dependencies, as their pyproject.toml files list them."""
    found = []
    for project in (ROOT / "pyproject.toml", ROOT / "client" / "pyproject.toml"):
        listed = tomllib.loads(project.read_text())["project"]["dependencies"]
        found += [Requirement(line) for line in listed]
    return found


def serve_distributions() -> set[str]:
    """The canonical names of every distribution the serve install brings (the venv's seeds
    included), following each requirement's extras and markers through the metadata of this
    environment's distributions."""
    found = {canonical(name) for name in VENV_SEEDS + OWN}
    pending = [(requirement, "") for requirement in serve_requirements()]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonical(requirement.name)
        wanted = [(name, "")] + [(name, canonical(e)) for e in sorted(requirement.extras)]
        for dist_name, dist_extra in wanted:
            key = f"{dist_name}[{dist_extra}]" if dist_extra else dist_name
            if key in found:
                continue
            found.add(key)
            requires = metadata.distribution(dist_name).requires or []
            pending += [(Requirement(line), dist_extra) for line in requires]
    return {name for name in found if "[" not in name}


def modules_outside_the_serve_install() -> list[str]:
    """Top-level modules installed here that no distribution of the serve install provides."""
    serving = serve_distributions()
    outside = []
    for module, providers in metadata.packages_distributions().items():
        if module in sys.stdlib_module_names or not module.isidentifier():
            continue
        if not {canonical(provider) for provider in providers} & serving:
            outside.append(module)
    return sorted({*outside, LAB})


def write_sitecustomize(folder: Path) -> Path:
    """A ``sitecustomize.py`` in ``folder`` (put it on ``PYTHONPATH``) that makes every module
    outside the serve install fail to import, as a ``ModuleNotFoundError``."""
    folder.mkdir(parents=True, exist_ok=True)
    names = modules_outside_the_serve_install()
    (folder / "sitecustomize.py").write_text(
        "import sys\n"
        f"for name in {names!r}:\n"
        "    sys.modules[name] = None  # imported as: ModuleNotFoundError\n"
    )
    return folder
