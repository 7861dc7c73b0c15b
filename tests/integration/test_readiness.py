"""Liveness at once, readiness once every model is loaded and warmed; a model that fails is
reported while the others serve, and a server with no model at all exits with the reason."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.integration.live import live_server, png_size, poll_until, start_process
from tests.support import image_bytes, write_test_models

pytestmark = pytest.mark.slow

BIG_MODEL = "big"
"""A ResNet-152 at 224 px (60 M parameters): a second or more to build and warm up, so the
server is observably alive but not ready for a while."""


def _write_big_model(folder: Path, name: str) -> None:
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\narchitecture = "resnet152"\nweights = "random"\n'
        "num_classes = 10\ninput_size = 224\n"
    )


def _write_broken_model(folder: Path) -> None:
    (folder / "broken.toml").write_text(
        'name = "broken"\narchitecture = "resnet18"\nweights = "missing-checkpoint.pt"\n'
        "num_classes = 10\ninput_size = 64\n"
    )


@pytest.fixture
def slow_models_dir(tmp_path: Path) -> Path:
    folder = write_test_models(tmp_path / "models")
    _write_big_model(folder, BIG_MODEL)
    _write_broken_model(folder)
    return folder


def test_alive_at_once_ready_after_warm_up_and_a_broken_model_is_reported(
    slow_models_dir: Path, work_dir: Path
) -> None:
    with live_server(slow_models_dir, work_dir, wait_for="/healthz") as server:
        early = httpx.get(server.url("/readyz"), timeout=10)
        assert early.status_code == 503, early.text
        assert early.json()["ready"] is False
        assert "loading" in early.json()["models"].values(), early.json()

        poll_until(
            lambda: httpx.get(server.url("/readyz"), timeout=10).status_code == 200,
            timeout=120,
            what="/readyz 200",
        )
        ready = httpx.get(server.url("/readyz"), timeout=10).json()
        assert ready["ready"] is True
        assert ready["models"] == {
            BIG_MODEL: "ready",
            "broken": "failed",
            "mini": "ready",
            "tiny": "ready",
        }
        assert set(ready["failed"]) == {"broken"}
        assert "missing-checkpoint.pt" in ready["failed"]["broken"]
        assert httpx.get(server.url("/healthz"), timeout=10).status_code == 200

        served = _cam(server.url("/v1/cam"), "tiny")
        assert served.status_code == 200, served.text
        assert png_size(served.content) == (80, 60)
        refused = _cam(server.url("/v1/cam"), "broken")
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "model_unavailable"


def _cam(url: str, model: str) -> httpx.Response:
    return httpx.post(
        url,
        params={"model": model},
        content=image_bytes(80, 60),
        headers={"Content-Type": "image/png"},
        timeout=60,
    )


@pytest.fixture(scope="module")
def no_model_exit(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    """Exit code and output of a server whose only model cannot be loaded."""
    folder = tmp_path_factory.mktemp("broken-models")
    _write_broken_model(folder)
    server = start_process(folder, tmp_path_factory.mktemp("no-model-server"))
    code = server.wait(timeout_s=60)
    return code, server.log(tail=None)


def test_a_server_where_no_model_loads_exits_with_the_reason(
    no_model_exit: tuple[int, str],
) -> None:
    code, log = no_model_exit
    assert code != 0, log
    assert "no model could be loaded" in log
    assert "missing-checkpoint.pt" in log


def test_the_exit_reason_is_one_line(no_model_exit: tuple[int, str]) -> None:
    """The 'error: ...' line is not wrapped at 80 columns (stderr is no terminal here), so a
    container log keeps the reason and its path on one line."""
    _, log = no_model_exit
    reason = next(line for line in log.splitlines() if line.startswith("error: "))
    assert "missing-checkpoint.pt not found" in reason, reason


BROKEN_MANIFESTS = {
    # file stem: (its text, a part of the reason every report gives)
    "typo": (
        'name = "typo"\narchitecture = "resnet18"\nweights = "random"\nlayr = "layer4"\n',
        "unknown field 'layr' (did you mean 'layer'?)",
    ),
    "half": ('name = "half"\narchitecture = \n', "invalid TOML"),
    "odd": (
        'name = "odd"\narchitecture = "resnet5"\nweights = "random"\n',
        "model 'odd': unsupported architecture 'resnet5'; did you mean resnet50 or resnet152 "
        "or resnet34? `camserve models --architectures` lists the supported ones",
    ),
}


def test_manifests_that_cannot_be_read_are_all_reported_while_the_others_serve(
    tmp_path: Path, work_dir: Path
) -> None:
    """Two schema errors and an unknown architecture in one folder: one start reports all three
    (in the start-up report and log, /readyz and /v1/models), each with its short reason, and
    the good models serve."""
    folder = write_test_models(tmp_path / "models")
    for stem, (text, _reason) in BROKEN_MANIFESTS.items():
        (folder / f"{stem}.toml").write_text(text)

    with live_server(folder, work_dir) as server:
        ready = httpx.get(server.url("/readyz"), timeout=10).json()
        listed = httpx.get(server.url("/v1/models"), timeout=10).json()
        served = _cam(server.url("/v1/cam"), "tiny")
        log = server.log(tail=None)

    assert served.status_code == 200, served.text
    assert ready["models"] == {
        "half": "failed",
        "mini": "ready",
        "odd": "failed",
        "tiny": "ready",
        "typo": "failed",
    }
    assert listed["failed"] == ready["failed"]
    for stem, (_text, reason) in BROKEN_MANIFESTS.items():
        assert reason in ready["failed"][stem]
        assert len(ready["failed"][stem]) < 300, ready["failed"][stem]
        assert f"  not served: {stem}: {ready['failed'][stem]}" in log.splitlines()
