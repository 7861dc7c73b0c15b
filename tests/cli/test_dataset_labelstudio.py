"""``camserve dataset-labelstudio``: a task file names local images only with a hint on stderr
about ``--local-files-root`` and ``--image-prefix``, since Label Studio cannot open a path on this
machine by itself; with the local-files prefix, the paths are relative to the local files root
(``--local-files-root``, else the ``LOCAL_FILES_DOCUMENT_ROOT`` setting)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from camserve.cli import cli
from camserve.cli.dataset_labelstudio import LOCAL_FILES_HINT
from camserve.dataset import stored
from camserve.dataset.local_files import LOCAL_FILES_ROOT_SETTINGS
from camserve.dataset.stored import StoredImage

runner = CliRunner()


@pytest.fixture(autouse=True)
def no_root_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in LOCAL_FILES_ROOT_SETTINGS:
        monkeypatch.delenv(name, raising=False)


def _run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, paths: list[str], *options: str
) -> Result:
    images = [StoredImage(f"img/{i}.png", path) for i, path in enumerate(paths)]
    monkeypatch.setattr(stored, "read_images", lambda _output, _methods: images)
    tasks_file = tmp_path / "tasks.json"
    return runner.invoke(
        cli, ["dataset-labelstudio", str(tmp_path / "rows"), "-o", str(tasks_file), *options]
    )


def _tasks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, paths: list[str], *options: str
) -> tuple[list[dict[str, object]], str, str]:
    """The tasks written for images at ``paths``, and the command's stdout and stderr."""
    result = _run(monkeypatch, tmp_path, paths, *options)
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "tasks.json").read_text()), result.stdout, result.stderr


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
        monkeypatch, tmp_path, ["/photos/a.png"], "--image-prefix", "https://images.example"
    )
    assert prefixed[0]["data"] == {
        "image": "https://images.example/photos/a.png",
        "camserve_id": "img/0.png",
    }
    assert "--image-prefix" not in stderr

    _, _, stderr = _tasks(monkeypatch, tmp_path, ["s3://bucket/a.png", "https://x.test/b.png"])
    assert "wrote 2 tasks" in stderr
    assert "--image-prefix" not in stderr


def test_local_files_are_named_relative_to_the_root(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = tmp_path / "files"
    images = [str(root / "set" / "a.png"), str(root / "set" / "b c.png")]
    options = ("--image-prefix", "/data/local-files/?d=", "--local-files-root", str(root))

    tasks, _, stderr = _tasks(monkeypatch, tmp_path, images, *options)

    assert [task["data"]["image"] for task in tasks] == [
        "/data/local-files/?d=set/a.png",
        "/data/local-files/?d=set/b%20c.png",
    ]
    assert "--local-files-root" not in stderr
    alone, _, _ = _tasks(monkeypatch, tmp_path, images, "--local-files-root", str(root))
    assert alone == tasks


def test_the_root_defaults_to_the_local_files_setting(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("LOCAL_FILES_DOCUMENT_ROOT", str(tmp_path / "files"))
    tasks, _, _ = _tasks(
        monkeypatch,
        tmp_path,
        [str(tmp_path / "files" / "a.png")],
        "--image-prefix",
        "/data/local-files/?d=",
    )
    assert tasks[0]["data"]["image"] == "/data/local-files/?d=a.png"


def test_the_local_files_prefix_without_a_root_says_what_to_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = _run(
        monkeypatch, tmp_path, ["/photos/a.png"], "--image-prefix", "/data/local-files/?d="
    )

    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert "pass --local-files-root DIR with that folder, or set LOCAL_FILES_DOCUMENT_ROOT" in (
        message
    )
    assert not (tmp_path / "tasks.json").exists()


def test_an_image_outside_the_root_fails_naming_both(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    root = tmp_path / "files"
    result = _run(monkeypatch, tmp_path, ["/photos/a.png"], "--local-files-root", str(root))

    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert f"the image /photos/a.png is outside the local files root {root.resolve()}" in message
    assert not (tmp_path / "tasks.json").exists()
