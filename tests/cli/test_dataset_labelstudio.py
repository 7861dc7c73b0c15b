"""``camserve dataset-labelstudio``: a task file names local images only with a hint on stderr
about ``--image-prefix``, since Label Studio cannot open a path on this machine by itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.cli import cli
from app.cli.dataset_labelstudio import LOCAL_FILES_HINT
from app.dataset import stored
from app.dataset.stored import StoredImage

runner = CliRunner()


def _tasks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, paths: list[str], *options: str
) -> tuple[list[dict[str, object]], str, str]:
    """The tasks written for images at ``paths``, and the command's stdout and stderr."""
    images = [StoredImage(f"img/{i}.png", path) for i, path in enumerate(paths)]
    monkeypatch.setattr(stored, "read_images", lambda _output, _methods: images)
    tasks_file = tmp_path / "tasks.json"
    result = runner.invoke(
        cli, ["dataset-labelstudio", str(tmp_path / "rows"), "-o", str(tasks_file), *options]
    )
    assert result.exit_code == 0, result.output
    return json.loads(tasks_file.read_text()), result.stdout, result.stderr


def test_local_paths_come_with_the_image_prefix_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tasks, stdout, stderr = _tasks(monkeypatch, tmp_path, ["/photos/a.png", "/photos/b.png"])

    assert [task["data"] for task in tasks] == [
        {"image": "/photos/a.png", "camserve_id": "img/0.png"},
        {"image": "/photos/b.png", "camserve_id": "img/1.png"},
    ]
    assert LOCAL_FILES_HINT in " ".join(stderr.split())
    assert "--image-prefix" in LOCAL_FILES_HINT
    assert "--image-prefix" not in stdout


def test_a_prefix_or_urls_need_no_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    prefixed, _, stderr = _tasks(
        monkeypatch, tmp_path, ["/photos/a.png"], "--image-prefix", "/data/local-files/?d="
    )
    assert prefixed[0]["data"] == {
        "image": "/data/local-files/?d=/photos/a.png",
        "camserve_id": "img/0.png",
    }
    assert "--image-prefix" not in stderr

    _, _, stderr = _tasks(monkeypatch, tmp_path, ["s3://bucket/a.png", "https://x.test/b.png"])
    assert "wrote 2 tasks" in stderr
    assert "--image-prefix" not in stderr
