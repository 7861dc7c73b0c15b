"""Listing a dataset's images: folders, globs and CSV / Parquet / JSONL manifests."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from camserve.dataset.inputs import DatasetInputError, ImageRef, list_images, read_file
from tests.support import write_image_folder

SIZES = {"a.png": (20, 10), "b/c.jpg": (12, 12), "b/d/e.webp": (8, 9)}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = write_image_folder(tmp_path / "images", SIZES)
    (root / "notes.txt").write_text("not an image")
    (root / ".hidden.png").write_bytes(b"")
    return root


def test_a_folder_lists_its_images_by_relative_path(folder: Path) -> None:
    assert list_images(str(folder)) == [
        ImageRef(relative, str(folder / relative))
        for relative in ["a.png", "b/c.jpg", "b/d/e.webp", "broken.png"]
    ]


def test_a_glob_matches_across_folders_from_its_fixed_part(folder: Path) -> None:
    assert [ref.image_id for ref in list_images(str(folder / "b" / "*.*"))] == [
        "c.jpg",
        "d/e.webp",
    ]
    assert [ref.image_id for ref in list_images(str(folder / "*.png"))] == ["a.png", "broken.png"]


def write_manifest(path: Path, rows: list[dict[str, str]]) -> Path:
    table = pa.Table.from_pylist(rows)
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    elif path.suffix == ".csv":
        lines = [",".join(rows[0])] + [",".join(row.values()) for row in rows]
        path.write_text("\n".join(lines) + "\n")
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_a_manifest_lists_its_paths_relative_to_itself_with_its_ids(
    folder: Path, suffix: str
) -> None:
    rows = [
        {"id": "first", "path": "a.png"},
        {"id": "second", "path": str(folder / "b" / "c.jpg")},
    ]
    manifest = write_manifest(folder / f"list{suffix}", rows)
    images = list_images(str(manifest))
    assert images == [
        ImageRef("first", str(folder / "a.png")),
        ImageRef("second", str(folder / "b" / "c.jpg")),
    ]
    assert read_file(images[0].path) == (folder / "a.png").read_bytes()


def test_a_relative_manifest_resolves_its_paths_from_its_folder_not_the_current_one(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_manifest(folder / "b" / "list.csv", [{"path": "c.jpg"}, {"path": "../a.png"}])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    images = list_images("../images/b/list.csv")

    assert [ref.image_id for ref in images] == ["c.jpg", "../a.png"]
    real = folder.resolve()
    assert [Path(ref.path).resolve() for ref in images] == [real / "b" / "c.jpg", real / "a.png"]
    assert all(Path(ref.path).is_absolute() for ref in images)


def test_without_an_id_column_the_path_is_the_id(folder: Path) -> None:
    manifest = write_manifest(folder / "list.jsonl", [{"image": "b/c.jpg"}])
    assert list_images(str(manifest)) == [ImageRef("b/c.jpg", str(folder / "b" / "c.jpg"))]


def test_bad_inputs_are_refused_with_their_reason(folder: Path) -> None:
    with pytest.raises(DatasetInputError, match="no such file"):
        list_images(str(folder / "missing"))
    with pytest.raises(DatasetInputError, match="neither a folder nor a manifest"):
        list_images(str(folder / "a.png"))
    no_paths = write_manifest(folder / "bad.csv", [{"name": "a.png"}])
    with pytest.raises(DatasetInputError, match="column of image paths"):
        list_images(str(no_paths))
    repeated = write_manifest(folder / "twice.jsonl", [{"path": "a.png"}, {"path": "a.png"}])
    with pytest.raises(DatasetInputError, match=r"unique; repeated: a\.png"):
        list_images(str(repeated))
    with pytest.raises(DatasetInputError, match="no images found"):
        list_images(str(folder / "*.gif"))
