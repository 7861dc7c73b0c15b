"""The shape samples in app/camserve/web/static/samples/shapes are the ones
scripts/assets/make_samples.py writes (tests/lab/test_shipped_model.py checks that the model
reads each one right), and so are the detector's and the segmenter's in shapes-detector/ and
shapes-segmenter/, each a scene of several shapes the model reads right."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from camserve_lab.scenes import SHAPES
from scripts.assets.make_samples import (
    DETECTOR,
    SAMPLES_DIR,
    SAMPLES_ROOT,
    SEGMENTER,
    chosen_dense_samples,
    write_dense_samples,
    write_samples,
)


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


def test_the_dense_samples_are_regenerated_byte_for_byte(tmp_path: Path) -> None:
    written = write_dense_samples(tmp_path)
    groups: dict[str, list[str]] = {DETECTOR: [], SEGMENTER: []}
    for path in written:
        groups[path.parent.name].append(path.name)
    assert groups == {name: ["scene-1.jpg", "scene-2.jpg", "scene-3.jpg"] for name in groups}
    for path in written:
        shipped = SAMPLES_ROOT / path.parent.name / path.name
        assert shipped.read_bytes() == path.read_bytes(), shipped
        assert shipped.stat().st_size <= 45_000
        with Image.open(shipped) as image:
            assert image.format == "JPEG"
            assert 400 <= image.width <= 480, "landscape, as a card shows it largest"
            assert 4 / 3 - 0.01 <= image.width / image.height <= 3 / 2 + 0.01


def test_each_dense_sample_shows_several_shapes_of_several_classes() -> None:
    chosen = chosen_dense_samples()
    indices = [sample.index for samples in chosen.values() for sample in samples]
    assert len(set(indices)) == len(indices), "each group shows other scenes"
    for samples in chosen.values():
        for sample in samples:
            labels = {item.label_name for item in sample.scene.objects}
            assert len(sample.scene.objects) >= 3
            assert len(labels) >= 3, labels
