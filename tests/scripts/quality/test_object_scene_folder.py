"""The held-out scene folder: one PNG per scene, and a boxes.csv row naming its largest shape,
read back by the datasets' own CSV reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from camserve.quality.datasets import read_csv_boxes
from camserve_lab.object_scenes import DENSE_LABELS
from scripts.quality.object_scene_folder import write_scene_folder
from tests.support import held_out_scenes


def test_each_scene_is_written_with_its_largest_shape_s_box(tmp_path: Path) -> None:
    scenes = held_out_scenes(3, min_objects=2)
    boxes = write_scene_folder(tmp_path, scenes)
    annotations = read_csv_boxes(boxes, DENSE_LABELS.index)
    assert sorted(annotations) == ["scene-000.png", "scene-001.png", "scene-002.png"]
    for index, scene in enumerate(scenes):
        name = f"scene-{index:03d}.png"
        assert np.array_equal(np.asarray(Image.open(tmp_path / name)), scene.image)
        areas = [int(item.mask.sum()) for item in scene.objects]
        largest = scene.objects[areas.index(max(areas))]
        assert annotations[name].box == largest.box
        assert annotations[name].label == largest.label
