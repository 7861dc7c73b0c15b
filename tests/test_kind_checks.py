"""Outside the task adapters (``serving/tasks/``) and the manifest parser, the app asks which
kind of model it holds in few places, each one marked ``# kind check:`` (on its line or the
line above) with the reason the question cannot go to an adapter; everything else asks the
adapter of the model's kind."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app" / "camserve"
EXEMPT = (
    APP / "serving" / "tasks",
    APP / "engine" / "models" / "manifest.py",
    APP / "engine" / "models" / "ultralytics_manifest.py",
)
"""The adapters, whose job is the kinds; and the manifest parser (``manifest.py`` and the part
that checks a ``source = "ultralytics"`` manifest), which checks a manifest's fields against its
task."""
TASKS = {"classification", "detection", "segmentation"}
MODEL_CLASSES = {"SegmentationScores", "DetectorExplainer", "LoadedDenseModel", "LoadedModel"}
"""The classes whose type tells a model's kind."""
MARK = "# kind check:"
MOST_KIND_CHECKS = 4
"""The places allowed (issue #53 aims at 5 at most): two of them keep and read the segmenter's
per-pass state in its model (its last scores), which stateless segmenter targets would remove;
two sit where the adapters cannot be imported (the engine below them, the CLI's torch-free
common module)."""
KIND_FREE = ("serving/worker.py", "serving/batch_dispatch.py")
"""The modules a new kind of model (another detector family) must not need to touch."""
CALLERS = ("worker", "batch_dispatch", "service", "live_versions", "served_models", "runtime")
"""The serving modules that ask the adapters."""
KIND_MODULES = (
    "camserve.serving.detector_jobs",
    "camserve.serving.segmenter_jobs",
    "camserve.serving.classifier_batches.explain_classifier_batch",
    "camserve.serving.tasks.classifier",
    "camserve.serving.tasks.detector",
    "camserve.serving.tasks.segmenter",
    "camserve.engine.models.dense",
    "camserve.engine.models.segmenters",
)


def _names(node: ast.expr) -> set[str]:
    """The identifiers an operand is, or lists: ``task``, ``spec.task``, ``(A, B)``."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_names(element) for element in node.elts))
    return set()


def _literals(node: ast.expr) -> set[str]:
    """The string constants an operand is, or lists."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*(_literals(element) for element in node.elts))
    return set()


def asks_kind(node: ast.AST) -> bool:
    """A comparison with a task's name (``task == "detection"``, ``task in TABLE``) or an
    ``isinstance`` on a model class."""
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        if any(_literals(operand) & TASKS for operand in operands):
            return True
        table = any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and any(
            isinstance(operand, ast.Name) and operand.id.isupper() for operand in operands
        )
        return table and any("task" in _names(operand) for operand in operands)
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    is_type_check = node.func.id == "isinstance" and len(node.args) == 2
    return is_type_check and bool(_names(node.args[1]) & MODEL_CLASSES)


def kind_checks() -> list[tuple[str, int, str]]:
    """Every place outside ``EXEMPT`` that asks the kind: (path, line, the line's text with
    the comment on the line above it, where the reason is given)."""
    found = []
    for path in sorted(APP.rglob("*.py")):
        if any(path == exempt or exempt in path.parents for exempt in EXEMPT):
            continue
        lines = ["", *path.read_text().splitlines()]
        for node in ast.walk(ast.parse(path.read_text())):
            if asks_kind(node):
                line = node.lineno  # type: ignore[attr-defined]
                above = lines[line - 1] if lines[line - 1].strip().startswith("#") else ""
                found.append((str(path.relative_to(ROOT)), line, f"{above} {lines[line]}"))
    return sorted(set(found))


def test_the_check_finds_each_way_of_asking_the_kind() -> None:
    asking = [
        'task == "detection"',
        'spec.task != "classification"',
        'model.task in ("detection", "segmentation")',
        "options.task in DENSE_SHAPES",
        "isinstance(engine, DetectorExplainer)",
        "isinstance(engine.model, (CamEngine, SegmentationScores))",
    ]
    not_asking = ["task in done", "isinstance(result, BaseException)", 'name == "detection_box"']
    assert [any(map(asks_kind, ast.walk(ast.parse(code)))) for code in asking] == [True] * 6
    assert [any(map(asks_kind, ast.walk(ast.parse(code)))) for code in not_asking] == [False] * 3


def test_every_place_that_asks_the_kind_says_why() -> None:
    unmarked = [f"{path}:{line}: {text.strip()}" for path, line, text in kind_checks()]
    unmarked = [place for place in unmarked if MARK not in place]
    assert unmarked == []


def test_few_places_outside_the_adapters_ask_the_kind() -> None:
    places = {(path, line) for path, line, _ in kind_checks()}
    assert len(places) <= MOST_KIND_CHECKS


def _imports(path: Path) -> set[str]:
    """Every ``from X import y`` of ``path`` as ``X`` and ``X.y``."""
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module is not None:
            modules |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return modules


def test_the_worker_and_batch_dispatch_import_no_kind_of_model() -> None:
    imported = {name: sorted(_imports(APP / name) & set(KIND_MODULES)) for name in KIND_FREE}
    assert imported == {name: [] for name in KIND_FREE}


def test_the_adapters_import_nothing_that_calls_them() -> None:
    """They sit below the worker, the service and the loading that ask them."""
    callers = {f"camserve.serving.{name}" for name in CALLERS}
    imported = {
        path.name: sorted(_imports(path) & callers)
        for path in sorted((APP / "serving" / "tasks").glob("*.py"))
    }
    assert imported == {name: [] for name in imported}
