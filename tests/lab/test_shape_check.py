"""shape_check: the confusion matrix, accuracy and pointing of the demo model on scenes, checked
against the model's own outputs computed apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from camserve_lab.scenes import HELD_OUT_SCENES, SHAPES, scenes
from camserve_lab.shape_check import ShapeCheck, check_shapes, main, shapes_engine

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_accuracy_per_class_accuracy_and_pointing_come_from_the_counts() -> None:
    confusion = np.diag([4, 3, 2, 1, 0]).astype(np.int64)
    confusion[4, 3] = 5  # five crosses read as stars
    confusion[1, 0] = 1
    check = ShapeCheck(confusion, pointing_hits=12)
    assert check.count == 16
    assert check.accuracy == 10 / 16
    assert check.pointing == 12 / 16
    assert check.class_accuracy("square") == 3 / 4
    assert check.class_accuracy("cross") == 0.0
    table = check.describe().splitlines()
    assert table[0] == "16 scenes: accuracy 62.5%, Grad-CAM pointing 75.0%"
    assert table[-1] == "| cross | 0 | 0 | 0 | 5 | 0 | 0.0% |"


def test_the_check_agrees_with_the_models_own_predictions() -> None:
    engine = shapes_engine(MODELS)
    drawn = list(scenes(5, 20, HELD_OUT_SCENES))
    check = check_shapes(engine, drawn)
    assert check.count == 20
    rows = check.confusion.sum(axis=1).tolist()
    assert rows == [sum(s.label == k for s in drawn) for k in range(len(SHAPES))]
    model = engine.model.eval()
    correct = 0
    with torch.no_grad():
        for scene in drawn:
            pixels = torch.from_numpy(scene.image).permute(2, 0, 1).contiguous()
            logits = model(engine.preprocessing([pixels], torch.device("cpu")))
            correct += int(logits.argmax(dim=1).item() == scene.label)
    assert int(np.trace(check.confusion)) == correct
    assert 0 < check.pointing_hits <= 20


def test_the_command_prints_the_summary_and_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["--scenes", "6", "--seed", "3", "--models", str(MODELS)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("6 scenes: accuracy ")
    assert len(lines) == 3 + len(SHAPES)
