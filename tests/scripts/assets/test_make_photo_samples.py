"""scripts/assets/make_photo_samples.py: the shipped photos are small JPEGs it writes, with a NOTICE
that names each one's source and licence."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from scripts.assets.make_photo_samples import (
    LONG_SIDES,
    MAX_BYTES,
    NOTICE_NAME,
    PHOTOS,
    PHOTOS_DIR,
    write_photos,
)


def test_the_shipped_photos_are_what_the_script_writes(tmp_path: Path) -> None:
    written = write_photos(tmp_path)
    assert [path.name for path in written] == [f"{photo.name}.jpg" for photo in PHOTOS]
    assert sorted(path.name for path in PHOTOS_DIR.iterdir()) == sorted(
        [NOTICE_NAME, *(path.name for path in written)]
    )
    for path in written:
        with Image.open(path) as image:
            assert image.format == "JPEG"
            assert max(image.size) <= LONG_SIDES[0]
        assert path.stat().st_size < MAX_BYTES
        assert path.read_bytes() == (PHOTOS_DIR / path.name).read_bytes(), path.name
    assert (tmp_path / NOTICE_NAME).read_text() == (PHOTOS_DIR / NOTICE_NAME).read_text()


def test_the_notice_names_every_photo_with_its_licence() -> None:
    notice = (PHOTOS_DIR / NOTICE_NAME).read_text()
    for photo in PHOTOS:
        entry = notice.split(f"{photo.name}.jpg\n", 1)[1]
        source, licence = entry.splitlines()[:2]
        assert source == f"  source:  {photo.source}"
        assert licence == f"  licence: {photo.licence}"
    assert "CC0" in notice
    assert "public domain" in notice
