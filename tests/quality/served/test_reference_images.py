"""The reference images of a served report: the manifest's folder or the shipped samples, the
first ones by name up to the limit, unreadable files left out, a digest that follows the bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from camserve.engine.errors import CamserveError
from camserve.quality.audit.reference import SAMPLES
from camserve.quality.served.reference_images import load_reference_images, reference_folder_of
from tests.support import image_bytes


def folder_of_images(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (folder / f"image-{index}.png").write_bytes(image_bytes(40, 30, seed=index))
    return folder


def test_the_manifest_folder_wins_over_the_shipped_samples(tmp_path: Path) -> None:
    assert reference_folder_of("shapes", tmp_path) == tmp_path
    assert reference_folder_of("shapes", None) == SAMPLES / "shapes"
    assert reference_folder_of("my-model", None) == SAMPLES / "photos"


def test_the_first_images_by_name_up_to_the_limit(tmp_path: Path) -> None:
    folder = folder_of_images(tmp_path / "ref", 4)
    (folder / "broken.png").write_bytes(b"not an image")
    images = load_reference_images(folder, 3)
    assert [sample.name for sample in images.samples] == [
        "image-0.png",
        "image-1.png",
        "image-2.png",
    ]
    assert tuple(images.samples[0].image.shape) == (3, 30, 40)
    everything = load_reference_images(folder, 10)
    assert len(everything.samples) == 4  # the broken file is left out
    assert everything.digest != images.digest


def test_the_digest_follows_the_bytes(tmp_path: Path) -> None:
    folder = folder_of_images(tmp_path / "ref", 2)
    before = load_reference_images(folder, 8).digest
    assert load_reference_images(folder, 8).digest == before
    (folder / "image-1.png").write_bytes(image_bytes(40, 30, seed=9))
    assert load_reference_images(folder, 8).digest != before


def test_a_missing_or_empty_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CamserveError, match="is not a folder"):
        load_reference_images(tmp_path / "absent", 8)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CamserveError, match="no readable image"):
        load_reference_images(tmp_path / "empty", 8)
