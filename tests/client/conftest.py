"""A real camserve serving the shapes demo model on 127.0.0.1, shared by the client's tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.live import LiveServer, live_server

REPOSITORY = Path(__file__).resolve().parents[2]


def shapes_models(folder: Path) -> Path:
    """A models folder with only the shapes demo model (its manifest and weights)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("shapes.toml", "shapes.pt"):
        shutil.copy(REPOSITORY / "models" / name, folder / name)
    return folder


QUEUE_OF_ONE = {"queue_size": 1, "max_batch_size": 1, "max_wait_ms": 0}
"""One job running and one waiting: a few concurrent calls already meet 429s (starting a server
costs seconds, so one serves the whole package, and the 429 tests use it as it is)."""


@pytest.fixture(scope="package")
def shapes_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """camserve with the shapes model and a queue of one, for the whole package."""
    models = shapes_models(tmp_path_factory.mktemp("models"))
    with live_server(models, tmp_path_factory.mktemp("server"), QUEUE_OF_ONE) as server:
        yield server
