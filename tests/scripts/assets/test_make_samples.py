"""The shape samples in app/web/static/samples/shapes are the ones
scripts/assets/make_samples.py writes (tests/quality/test_shipped_model.py checks that the model
reads each one right)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from app.quality.scenes import SHAPES
from scripts.assets.make_samples import SAMPLES_DIR, write_samples


def test_the_shipped_samples_are_small_and_regenerated_byte_for_byte(tmp_path: Path) -> None:
    written = write_samples(tmp_path)
    assert sorted(path.name for path in written) == sorted(f"{shape}.jpg" for shape in SHAPES)
    for path in written:
        shipped = SAMPLES_DIR / path.name
        assert shipped.read_bytes() == path.read_bytes(), path.name
        assert shipped.stat().st_size <= 20_000
        with Image.open(shipped) as image:
            assert image.format == "JPEG"
            assert 240 <= max(image.size) <= 400
            assert 2 / 3 - 0.01 <= image.width / image.height <= 3 / 2 + 0.01  # no tall strips
