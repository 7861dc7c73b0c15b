"""``camserve_client`` stands alone: usable without torch, importing nothing else of camserve."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "client" / "camserve_client"


def test_importing_the_client_loads_neither_torch_nor_the_server() -> None:
    probe = (
        "import sys, camserve_client; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'torch', 'torchvision', 'fastapi', 'starlette', 'uvicorn'} "
        "or m.split('.')[0] == 'camserve'))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=CLIENT.parents[1],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert loaded == "[]"


def test_no_client_module_imports_the_server_or_torch() -> None:
    outside = []
    for path in sorted(CLIENT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            outside += [
                f"{path.name}: {name}"
                for name in names
                if name.split(".")[0] not in {"camserve_client", "__future__"}
                and name.split(".")[0] in {"camserve", "app", "torch", "torchvision"}
            ]
    assert outside == []
