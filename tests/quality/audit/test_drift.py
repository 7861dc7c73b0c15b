"""Drift between two versions' maps: the same maps do not move, a peak carried across the image
moves, a small shift stays in its region, and only what both versions share is compared."""

from __future__ import annotations

import numpy as np
import torch

from camserve.quality.audit.drift import (
    MAP_SIDE,
    PEAK_DISTANCE,
    VersionMaps,
    compare_versions,
    version_maps,
)
from tests.tolerances import FEW_OPS, float32_approx

SIDE = 32


def blob(row: int, column: int, side: int = SIDE) -> np.ndarray:
    """A Gaussian bump peaking at (row, column), in [0, 1]."""
    rows, columns = np.mgrid[0:side, 0:side]
    return np.exp(-((rows - row) ** 2 + (columns - column) ** 2) / 40.0).astype(np.float32)


def version(
    name: str, peaks: list[tuple[int, int]], targets: list[int] | None = None
) -> VersionMaps:
    maps = np.stack([blob(*peak) for peak in peaks])
    images = [f"image-{index}.png" for index in range(len(peaks))]
    return VersionMaps(name, images, targets or [0] * len(peaks), {("gradcam", "layer4"): maps})


def test_the_same_maps_have_not_moved() -> None:
    old = version("a", [(5, 5), (20, 12), (28, 28)])
    new = version("b", [(5, 5), (20, 12), (28, 28)])
    drift = compare_versions(old, new)
    (pair,) = drift.pairs
    assert pair.moved_ratio == 0.0
    assert pair.mean_spearman == 1.0
    assert [image.peak_shift for image in pair.images] == [0.0, 0.0, 0.0]
    assert drift.changed_predictions == []


def test_a_peak_carried_across_the_image_moves_and_a_small_shift_stays() -> None:
    old = version("a", [(5, 5), (20, 12), (16, 16), (8, 24)])
    new = version("b", [(27, 27), (21, 13), (16, 16), (24, 8)], targets=[0, 3, 0, 0])
    drift = compare_versions(old, new)
    (pair,) = drift.pairs
    assert [image.moved for image in pair.images] == [True, False, False, True]
    assert pair.moved_ratio == 0.5
    assert pair.images[0].peak_shift == float32_approx(
        np.hypot(22, 22) / np.hypot(SIDE, SIDE), FEW_OPS
    )
    assert pair.images[1].peak_shift < PEAK_DISTANCE
    assert pair.images[2].spearman == 1.0
    assert pair.images[0].spearman < 0.5 < pair.images[1].spearman < 1.0
    assert drift.changed_predictions == ["image-1.png"]
    assert drift.sentence("layer4") == (
        "at layer4 the new version's gradcam moved for 50 % of the 4 reference images "
        f"(rank correlation {pair.mean_spearman:.2f})"
    )


def test_only_the_images_and_pairs_both_versions_have_are_compared() -> None:
    old = version("a", [(5, 5), (20, 12)])
    new = VersionMaps(
        "b",
        ["image-1.png", "other.png"],
        [0, 0],
        {
            ("gradcam", "layer4"): np.stack([blob(20, 12), blob(3, 3)]),
            ("layercam", "layer4"): np.stack([blob(20, 12), blob(3, 3)]),
        },
    )
    drift = compare_versions(old, new)
    assert drift.images == ["image-1.png"]
    assert [(pair.method, [image.image for image in pair.images]) for pair in drift.pairs] == [
        ("gradcam", ["image-1.png"])
    ]
    assert drift.sentence("fused") == "at fused no map of both versions to compare"


def test_maps_of_another_input_size_are_compared_at_the_new_size() -> None:
    old = VersionMaps("a", ["x.png"], [0], {("gradcam", "layer4"): blob(8, 8, side=16)[None]})
    new = VersionMaps("b", ["x.png"], [0], {("gradcam", "layer4"): blob(16, 16)[None]})
    (pair,) = compare_versions(old, new).pairs
    assert pair.images[0].peak_shift < PEAK_DISTANCE
    assert pair.images[0].spearman > 0.99


def test_kept_maps_are_at_most_map_side_and_at_float16_precision() -> None:
    maps = torch.rand(2, 200, 100, generator=torch.Generator().manual_seed(0))
    kept = version_maps("v", ["a", "b"], torch.tensor([3, 1]), {("gradcam", "layer4"): maps})
    shrunk = kept.maps[("gradcam", "layer4")]
    assert shrunk.shape == (2, MAP_SIDE, MAP_SIDE)
    assert shrunk.dtype == np.float32
    assert np.array_equal(shrunk, shrunk.astype(np.float16).astype(np.float32))
    assert kept.targets == [3, 1]
    small = version_maps("v", ["a"], torch.tensor([0]), {("cam", "fc"): maps[:1, :20, :30]})
    assert small.maps[("cam", "fc")].shape == (1, 20, 30)


def test_the_json_names_both_versions_and_each_image() -> None:
    drift = compare_versions(version("a", [(5, 5)]), version("b", [(27, 27)]))
    body = drift.as_json()
    assert (body["previous_version"], body["version"]) == ("a", "b")
    assert body["peak_distance"] == PEAK_DISTANCE
    (row,) = body["rows"]
    assert (row["method"], row["layer"], row["moved_ratio"]) == ("gradcam", "layer4", 1.0)
    assert row["images"][0]["image"] == "image-0.png"
    assert row["images"][0]["moved"] is True
