"""``camserve explain --server URL``: through a real camserve on 127.0.0.1, the same files as a
local run with the same model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from typer.testing import CliRunner

from camserve.cli import cli
from tests.client.conftest import shapes_models
from tests.integration.live import LiveServer, free_port, live_server
from tests.support import write_image_folder

runner = CliRunner()
SIZES = {"a.png": (90, 60), "nested/b.jpg": (50, 70), "c.webp": (64, 64)}
OPTIONS = ["--method", "gradcam,eigencam", "--top-k", "2", "--heatmaps", "--alpha", "0.4"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shapes_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def server(models: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(models, tmp_path_factory.mktemp("server")) as running:
        yield running


@pytest.fixture
def images(tmp_path: Path) -> Path:
    return write_image_folder(tmp_path / "images", SIZES)


def _explain(images: Path, out: Path, *where: str) -> tuple[int, str, list[dict[str, object]]]:
    summary = out / "summary.json"
    result = runner.invoke(
        cli, ["explain", str(images), "-o", str(out), "--summary", str(summary), *OPTIONS, *where]
    )
    rows = json.loads(summary.read_text()) if summary.exists() else []
    return result.exit_code, result.output, rows


def _files(folder: Path) -> dict[str, np.ndarray]:
    return {
        str(path.relative_to(folder)): np.asarray(Image.open(path))
        for path in sorted(folder.rglob("*.png"))
    }


def test_through_a_server_the_files_are_those_of_a_local_run(
    server: LiveServer, models: Path, images: Path, tmp_path: Path
) -> None:
    local_code, _, local_rows = _explain(
        images, tmp_path / "local", "--model", "shapes", "--models-dir", str(models)
    )
    remote_code, output, remote_rows = _explain(
        images, tmp_path / "remote", "--server", server.base_url
    )
    assert (local_code, remote_code) == (1, 1), output  # broken.png skipped by both
    assert "explained 3 of 4 images" in output
    local, remote = _files(tmp_path / "local"), _files(tmp_path / "remote")
    # per image: gradcam for 2 classes and eigencam once, each an overlay and a heatmap
    assert len(remote) == len(SIZES) * (2 + 1) * 2
    assert sorted(remote) == sorted(local)
    # The server and the local run batch the images differently and run other thread counts, so
    # a map's float sums may round the other way at a few pixels (seen: 1 pixel in 4096): one
    # 8-bit level of heat there, which the colormap and the blend (alpha 0.4) turn into at most a
    # few levels of the overlay's colour.
    for name, pixels in remote.items():
        difference = np.abs(pixels.astype(int) - local[name].astype(int))
        assert difference.max() <= (1 if name.endswith("_heatmap.png") else 4), name
        assert np.count_nonzero(difference) <= 0.01 * difference.size, name
    for local_row, remote_row in zip(local_rows, remote_rows, strict=True):
        assert remote_row["source"] == local_row["source"]
        assert (remote_row["classes"], remote_row["labels"]) == (
            local_row["classes"],
            local_row["labels"],
        )
        assert remote_row["scores"] == pytest.approx(local_row["scores"], abs=1e-4)
        assert (remote_row["method"], remote_row["layer"]) == (
            local_row["method"],
            local_row["layer"],
        )
        assert bool(remote_row["error"]) == bool(local_row["error"])


def test_an_unreachable_server_ends_the_run_with_its_address(images: Path, tmp_path: Path) -> None:
    address = f"http://127.0.0.1:{free_port()}"
    code, output, _ = _explain(images, tmp_path / "out", "--server", address)
    assert code == 1
    assert address in output
    assert "connection_error" in output


def test_an_unknown_model_on_the_server_ends_the_run(
    server: LiveServer, images: Path, tmp_path: Path
) -> None:
    code, output, rows = _explain(
        images, tmp_path / "out", "--server", server.base_url, "--model", "nope"
    )
    assert code == 1
    assert "404 unknown_model" in output
    assert rows == []


def test_server_and_architecture_do_not_go_together(images: Path, tmp_path: Path) -> None:
    code, output, _ = _explain(
        images, tmp_path / "out", "--server", "http://127.0.0.1:9", "--architecture", "resnet18"
    )
    assert code == 1
    assert "--server explains with the server's models" in output
