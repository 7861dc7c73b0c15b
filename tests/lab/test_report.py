"""Evaluation reports: Markdown, CSV and the chart."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image

from camserve.quality.evaluate import (
    MethodScores,
)
from camserve_lab.report import (
    REPORT_COLUMNS,
    markdown_table,
    write_report,
)
from tests.tolerances import float32_approx

CLASSES = ["red", "green", "blue"]


# --------------------------------------------------------------------------- reports


def example_rows() -> list[MethodScores]:
    boxed = MethodScores(
        method="gradcam",
        layer="layer4",
        images=4,
        localized_images=3,
        threshold=0.5,
        pointing_game=0.75,
        iou_at_threshold=0.4,
        best_threshold=0.3,
        iou_at_best_threshold=0.45,
        deletion_auc=0.1,
        insertion_auc=0.6,
        average_drop=12.5,
        increase_in_confidence=25.0,
    )
    unboxed = replace(
        boxed,
        method="gradcam++",
        localized_images=0,
        pointing_game=None,
        iou_at_threshold=None,
        best_threshold=None,
        iou_at_best_threshold=None,
    )
    return [boxed, unboxed]


def test_write_report_writes_markdown_csv_and_a_chart(tmp_path: Path) -> None:
    rows = example_rows()
    paths = write_report(
        rows,
        tmp_path / "report",
        title="demo",
        command="camserve eval --scenes 4",
        notes=["cam on layer3 left out"],
    )

    markdown = paths["markdown"].read_text()
    assert markdown.startswith("# demo\n")
    assert "camserve eval --scenes 4" in markdown
    assert "Dataset: 4 images, 3 with a bounding box." in markdown
    assert markdown_table(rows) in markdown
    assert "| gradcam | layer4 | 4 | 3 | 0.750 | 0.400 | 0.300 | 0.450 |" in markdown
    assert "| gradcam++ | layer4 | 4 | 0 | n/a | n/a | n/a | n/a |" in markdown
    assert "IoU@0.5" in markdown
    assert "- cam on layer3 left out" in markdown

    with paths["csv"].open(newline="") as file:
        table = list(csv.reader(file))
    assert tuple(table[0]) == REPORT_COLUMNS
    assert table[1][:3] == ["gradcam", "layer4", "4"]
    assert float(table[1][REPORT_COLUMNS.index("deletion_auc")]) == float32_approx(0.1)
    assert table[2][REPORT_COLUMNS.index("pointing_game")] == ""

    with Image.open(paths["chart"]) as chart:
        chart.verify()
        assert chart.format == "PNG"
        assert chart.size[0] > 400


def test_write_report_needs_rows(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no scores"):
        write_report([], tmp_path, title="t", command="c")
