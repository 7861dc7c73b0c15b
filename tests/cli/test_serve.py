"""``camserve serve`` in a child process on 127.0.0.1: "ready" only once its port answers, and
a port that another program holds ends the start with one plain line and a non-zero status."""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from camserve.engine.models.shipped import SHIPPED_MODELS_DIR
from tests.harness.live_server import LOOPBACK, camserve_environment, free_port
from tests.support import write_test_models

START_TIMEOUT_S = 120
READY = "camserve is ready"


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_test_models(tmp_path_factory.mktemp("models"))


@pytest.fixture
def occupied_port() -> Iterator[int]:
    """A port on 127.0.0.1 that another program listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((LOOPBACK, 0))
        holder.listen()
        yield holder.getsockname()[1]


def serve_command(port: int) -> list[str]:
    return [sys.executable, "-m", "camserve", "serve", "--host", LOOPBACK, "--port", str(port)]


def test_a_taken_port_ends_the_start_with_one_plain_line(
    models_dir: Path, occupied_port: int, tmp_path: Path
) -> None:
    finished = subprocess.run(
        serve_command(occupied_port),
        env=camserve_environment(models_dir),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )
    assert finished.returncode == 1
    assert READY not in finished.stdout
    assert finished.stdout == ""
    assert finished.stderr.splitlines() == [
        f"error: port {occupied_port} on 127.0.0.1 is already in use by another program; "
        "choose another port: CAMSERVE_PORT=9000 make serve (or camserve serve --port 9000)"
    ]


@dataclass(frozen=True)
class _Served:
    """What a ``camserve serve`` said and answered: its report's first line, the answer to one
    request sent the moment that line was printed, the report's other lines, its exit status,
    and the page's address (``http://127.0.0.1:PORT/``)."""

    url: str
    first: str | None
    answer: httpx.Response
    rest: list[str | None]
    status: int


def _serve_and_ask(env: dict[str, str], folder: Path, path: str) -> _Served:
    """Start ``camserve serve`` in ``folder``, ask ``path`` once its first line is printed, then
    stop it (SIGTERM) and read the rest of its report."""
    port = free_port()
    process = subprocess.Popen(
        serve_command(port),
        env=env,
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = _lines_of(process)
        first = lines.get(timeout=START_TIMEOUT_S)
        answer = httpx.get(f"http://{LOOPBACK}:{port}{path}", timeout=10)
    finally:
        process.terminate()
        status = process.wait(60)
    rest = list(iter(lambda: lines.get(timeout=10), None))
    assert process.stdout is not None
    process.stdout.close()
    return _Served(f"http://{LOOPBACK}:{port}/", first, answer, rest, status)


def _ready_line(served: _Served) -> str:
    return f"{READY}: open {served.url} (API docs: {served.url}docs)"


def _lines_of(stream: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """The process's stdout, line by line, read on a thread; None once it ends."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert stream.stdout is not None
        for line in stream.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_ready_is_said_once_the_port_answers_without_the_port_hint(
    models_dir: Path, tmp_path: Path
) -> None:
    """The report's first line is read the moment it is printed and the server is asked at
    once: it answers, with the models loaded. The port was chosen, so no "another port" hint."""
    served = _serve_and_ask(camserve_environment(models_dir), tmp_path, "/readyz")
    assert served.first == _ready_line(served)
    assert served.answer.status_code == 200
    assert served.rest == ["  serving: mini (default), tiny", f"  models from: {models_dir}"]
    assert served.status == 0


def test_a_models_folder_of_another_project_gives_way_to_the_shipped_models(
    tmp_path: Path,
) -> None:
    """Started in an ML project whose ``models/`` holds Python code, not manifests: the shipped
    models serve (``shapes`` only here, to start quickly) and the report says why."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text("import torch\n")
    env = camserve_environment(tmp_path, settings={"models": "shapes"})
    del env["CAMSERVE_MODELS_DIR"]
    served = _serve_and_ask(env, tmp_path, "/v1/models")
    assert served.first == _ready_line(served)
    assert [model["name"] for model in served.answer.json()["models"]] == ["shapes"]
    assert served.rest == [
        "  serving: shapes (default)",
        f"  models from: the models shipped with camserve ({SHIPPED_MODELS_DIR}; ./models holds "
        "no manifest (*.toml), so it is not read)",
    ]
    assert served.status == 0
