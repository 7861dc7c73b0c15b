"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
import torch

from camserve.entry import quick_exit
from tests.harness.fiftyone_env import (
    INSTALL_HINT,
    FiftyOne,
    FiftyOneEnv,
    fiftyone_required,
    locate_fiftyone,
)
from tests.threads import torch_threads_for_tests

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def pytest_report_header() -> str:
    """What decides the rounding of this run: the processor's kernels and MKL's code path
    (``make test-mkl`` changes it) and the test process's torch threads (``make test-threads``)."""
    branch = os.environ.get("MKL_CBWR") or "automatic"
    capability = torch.backends.cpu.get_cpu_capability()
    threads = torch_threads_for_tests()
    return f"rounding: ATen CPU capability {capability}, MKL_CBWR {branch}, torch threads {threads}"


def pytest_unconfigure() -> None:
    """Leave the session's objects to the process's exit (``camserve.entry.quick_exit``)."""
    quick_exit()


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Every device this machine has: the CPU, and CUDA when there is a GPU."""
    return torch.device(request.param)


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _torch_threads() -> Iterator[None]:
    """One intra-op thread unless CAMSERVE_TEST_THREADS asks for more (``tests/threads.py``):
    the test models are tiny and gain nothing from threads, and on a machine shared with other
    test processes, threads spin-waiting for each other make a pass up to a hundred times
    slower. The servers the tests start keep one thread whatever the count here."""
    threads = torch.get_num_threads()
    torch.set_num_threads(torch_threads_for_tests())
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Block the network: every download attempt is recorded and fails as if offline."""
    attempts: list[str] = []

    def offline(url: str, *_args: object, **_kwargs: object) -> None:
        attempts.append(str(url))
        raise urllib.error.URLError("network unreachable (blocked by the test)")

    monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
    monkeypatch.setattr(torch.hub, "urlopen", offline)
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    return attempts


@pytest.fixture
def torch_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty TORCH_HOME; torch.hub.get_dir() follows it while no set_dir() overrides it."""
    home = tmp_path / "torch-home"
    monkeypatch.setenv("TORCH_HOME", str(home))
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    assert Path(torch.hub.get_dir()) == home / "hub"
    return home


def hub_file(home: Path, url: str) -> Path:
    return home / "hub" / "checkpoints" / os.path.basename(urlparse(url).path)


@pytest.fixture(scope="session")
def fiftyone_env() -> FiftyOneEnv:
    """FiftyOne's own environment (.venv-fiftyone, which `make test` sets up). Where it is
    missing the FiftyOne tests are skipped, except in CI or when FIFTYONE_VENV names one: then
    they fail."""
    env = locate_fiftyone()
    if env is None:
        message = f"FiftyOne's environment is missing: {INSTALL_HINT}"
        if fiftyone_required():
            pytest.fail(message)
        pytest.skip(message)
    return env


@pytest.fixture(scope="session")
def fiftyone(
    fiftyone_env: FiftyOneEnv, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FiftyOne]:
    """Real FiftyOne for the session: a mongod on 127.0.0.1 and FiftyOne's processes
    (tests/harness/fiftyone_env.py), all stopped at the end of the session. Give each dataset a name
    of its own."""
    with FiftyOne(fiftyone_env, tmp_path_factory.mktemp("fiftyone")) as running:
        yield running
