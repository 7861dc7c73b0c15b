"""The ``camserve`` group imports each command's module only when that command runs: every
command is listed and runs, and ``camserve models`` never imports torch or its kin."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

from typer.main import get_command
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.cli.lazy_commands import COMMAND_MODULES

runner = CliRunner()
HEAVY = ("torch", "torchvision", "timm", "transformers", "numpy", "PIL", "cv2", "fastapi", "ray")
REPOSITORY = Path(__file__).resolve().parents[2]


def _loaded_after(arguments: list[str]) -> dict[str, object]:
    """Run ``camserve *arguments`` in a fresh interpreter; its exit code and the heavy packages
    it imported."""
    code = (
        "import sys\n"
        f"sys.argv = ['camserve', *{arguments!r}]\n"
        "from camserve.cli import main\n"
        "try:\n    main()\nexcept SystemExit as end:\n    code = end.code\nelse:\n    code = 0\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
        "import json\nprint(json.dumps({'code': code, 'heavy': heavy}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPOSITORY
    )
    result: dict[str, object] = json.loads(completed.stdout.splitlines()[-1])
    return result


def test_every_module_registers_the_command_the_map_names() -> None:
    """camserve's own commands and the lab's (camserve_lab.cli, installed beside camserve in
    the test environment) alike."""
    for module in set(COMMAND_MODULES.values()):
        importlib.import_module(module)
    group = get_command(cli)
    registered = {
        name: group.get_command(None, name).callback.__module__  # type: ignore[arg-type,attr-defined,union-attr]
        for name in group.list_commands(None)  # type: ignore[attr-defined,arg-type]
    }

    assert registered == COMMAND_MODULES
    assert {name for name, module in registered.items() if module.startswith("camserve_lab.")} == {
        "eval",
        "train-demo",
        "train-dense",
    }


def test_a_command_runs_whether_or_not_its_module_was_imported_first() -> None:
    result = runner.invoke(cli, ["models", "--models-dir", str(REPOSITORY / "models")])

    assert result.exit_code == 0, result.output
    assert "shapes-detector" in result.output


def test_an_unknown_command_is_refused_with_the_closest_one() -> None:
    result = runner.invoke(cli, ["modles"])

    assert result.exit_code == 2
    assert "No such command 'modles'. Did you mean 'models'?" in result.output


def test_listing_the_models_imports_no_heavy_package(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    for manifest in (REPOSITORY / "models").glob("*.toml"):
        (folder / manifest.name).write_text(manifest.read_text())
        for checkpoint in (REPOSITORY / "models").glob(f"{manifest.stem}.pt"):
            (folder / checkpoint.name).write_bytes(b"")
    (folder / "imagenet.toml").write_text(
        'name = "imagenet"\narchitecture = "resnet18"\nweights = "random"\n'
        'labels = "torchvision:imagenet"\n'
    )

    ran = _loaded_after(["models", "--models-dir", str(folder)])

    assert ran == {"code": 0, "heavy": []}


def test_a_commands_help_imports_no_heavy_package() -> None:
    assert _loaded_after(["models", "--help"]) == {"code": 0, "heavy": []}
