"""The package layout that docs/design.md describes: imports only run down its table, from the
lab (camserve-lab, ``lab/camserve_lab``, which the server never imports) to the client."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app" / "camserve"
LAB = ROOT / "lab" / "camserve_lab"
LAYERS = [
    "lab",
    "cli",
    "dataset",
    "cluster",
    "api",
    "web",
    "labeling",
    "quality",
    "serving",
    "config",
    "engine",
    "client",
]
"""Top to bottom, as in docs/design.md's layout table."""


def package_of(module: str) -> str | None:
    """``camserve.serving.worker`` → ``serving``; None outside the layered packages."""
    parts = module.split(".")
    if parts[0] == "camserve_client":
        return "client"
    if parts[0] == "camserve_lab":
        return "lab"
    if parts[0] != "camserve" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    modules: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            modules.append(node.module)
        elif isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
    return modules


def test_no_package_imports_one_above_it() -> None:
    upward = []
    for path in [*sorted(APP.rglob("*.py")), *sorted(LAB.rglob("*.py"))]:
        own = package_of(module_name(path))
        if own is None:
            continue
        for module in imported_modules(path):
            target = package_of(module)
            if target is not None and LAYERS.index(target) < LAYERS.index(own):
                upward.append(f"{path.relative_to(ROOT)} imports {module}")
    assert upward == []


def test_the_design_document_lists_the_same_order() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    rows = [
        line
        for line in design.splitlines()
        if line.startswith(("| `lab/", "| `app/", "| `client/"))
    ]
    listed = [
        row.split("`")[1]
        .removeprefix("lab/camserve_")
        .removeprefix("app/camserve/")
        .removeprefix("client/camserve_")
        .removesuffix(".py")
        .rstrip("/")
        for row in rows
    ]
    assert listed[: len(LAYERS)] == LAYERS


ENGINE = APP / "engine"
ENGINE_PARTS = ["core", "models", "images", "errors"]
"""The engine's own layers, top to bottom: the compute core (``app/camserve/engine/*.py``) uses
getting a
model ready (``models/``), which uses images in and out (``images/``); all of them use the
error tree, which imports nothing of camserve."""
MAX_MODULE_LINES = 400


def engine_part(module: str) -> str | None:
    """``camserve.engine.models.registry`` → ``models``; None outside the engine."""
    parts = module.split(".")
    if parts[:2] != ["camserve", "engine"]:
        return None
    if len(parts) == 2 or parts[2] in {"models", "images", "errors"}:
        return parts[2] if len(parts) > 2 else "core"
    return "core"


def test_no_engine_part_imports_one_above_it() -> None:
    upward = []
    for path in sorted(ENGINE.rglob("*.py")):
        own = engine_part("camserve." + ".".join(path.relative_to(APP).with_suffix("").parts))
        assert own is not None
        for module in imported_modules(path):
            target = engine_part(module)
            if target is not None and ENGINE_PARTS.index(target) < ENGINE_PARTS.index(own):
                upward.append(f"{path.relative_to(ROOT)} imports {module}")
    assert upward == []


def test_the_engine_folder_holds_only_the_compute_core_and_its_groups() -> None:
    """The core's modules, ``detections/`` (the core's maps of the other detector families),
    and the two groups below it."""
    top = {path.name for path in ENGINE.iterdir() if not path.name.startswith("__")}
    assert {name for name in top if not name.endswith(".py")} == {"models", "images", "detections"}
    assert len([name for name in top if name.endswith(".py")]) <= 12


LIMITED_FOLDERS = (APP, ROOT / "client", ROOT / "lab", ROOT / "deploy")
"""The folders whose Python modules are held to ``MAX_MODULE_LINES``: the app, its client, the
lab, and the code that ships beside them (the CVAT function)."""


def test_no_module_is_longer_than_the_limit() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for folder in LIMITED_FOLDERS
        for path in sorted(folder.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def module_name(path: Path) -> str:
    """``app/camserve/serving/worker.py`` → ``camserve.serving.worker`` (``lab/camserve_lab/...``
    → ``camserve_lab...``); a package's ``__init__.py`` → the package."""
    root = LAB.parent if path.is_relative_to(LAB) else APP.parent
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_app_modules(path: Path, known: set[str]) -> set[str]:
    """The app modules ``path`` imports anywhere in it: at the top, in functions, or only for
    type checkers (``if TYPE_CHECKING:``), which still tie the two modules together."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                imported.add(submodule if submodule in known else node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    return imported & known


def import_graph(package: Path) -> dict[str, set[str]]:
    paths = {module_name(path): path for path in sorted(package.rglob("*.py"))}
    known = set(paths)
    return {module: imported_app_modules(path, known) - {module} for module, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle (its modules in order, the first repeated at the end), or []."""
    finished: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str]:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in finished:
            return []
        path.append(module)
        for imported in sorted(graph[module]):
            if cycle := visit(imported):
                return cycle
        path.pop()
        finished.add(module)
        return []

    for module in sorted(graph):
        if cycle := visit(module):
            return cycle
    return []


@pytest.mark.parametrize("package", [APP, LAB], ids=["camserve", "camserve_lab"])
def test_no_modules_import_each_other_in_a_circle(package: Path) -> None:
    assert find_cycle(import_graph(package)) == []


def test_the_cycle_finder_finds_a_circle_through_three_modules() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_the_product_never_imports_the_lab() -> None:
    """Not even inside a function: the server's wheel does not carry camserve_lab. The command
    line names the lab's command modules as strings (``cli/lazy_commands.py``) and imports one
    only when it runs."""
    importing = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted(APP.rglob("*.py"))
        for module in imported_modules(path)
        if module.split(".")[0] == "camserve_lab"
    ]
    assert importing == []
    assert package_of("camserve_lab.cli.train") == "lab"
