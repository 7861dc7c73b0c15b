"""The GPU run's dry run: ``benchmarks/gpu/run.sh --device cpu --size tiny`` runs every part on
small models and writes a summary whose every row carries its numbers (on a GPU machine the
same script runs at full size; docs/benchmarks.md, "GPU run")."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "benchmarks" / "gpu" / "run.sh"
RATIO = r"^\d+\.\d\d×"
TINY = "mobilenet_v3_small, batch 2"
MEASURED = {
    ("GPU tests", "pytest"): r"^(\d+) passed, 0 failed, (\d+) skipped$",
    ("GPU tests", "maps vs the CPU, float32: largest difference per model (its method)"): (
        r"^shapes 0 \(cam\), shapes-segmenter 0 \(\w+\), shapes-detector 0 \(\w+\)$"
    ),
    ("GPU tests", "rendering on the device vs the CPU, same maps"): r"^0 grey level",
    ("GPU tests", "GPU memory gauge under load"): r"^20 requests answered; no GPU gauge on cpu$",
    ("engine overhead, fp32", f"{TINY}: Grad-CAM / forward"): RATIO + r" \(\S+ vs \S+ s/img\)$",
    ("engine overhead, fp32", f"{TINY}: pytorch-grad-cam / forward"): RATIO + "$",
    ("engine overhead, fp32", f"{TINY}: top-5 Grad-CAM / forward"): RATIO + "$",
    ("seven methods", f"{TINY}: 7 methods in one call / Grad-CAM"): RATIO,
    ("seven methods", f"{TINY}: pytorch-grad-cam's 6 / Grad-CAM"): RATIO + "$",
    ("HTTP", "mobilenet_v3_small, concurrency 32: HTTP req/s / engine-only img/s"): (
        RATIO + r" \(median of pairs [\d.]+/[\d.]+\)$"
    ),
    ("Score-CAM", "mobilenet_v3_small features.3 (24 channels): s, peer / camserve"): (
        r"^camserve [\d.e-]+ s, bf16 [\d.e-]+ s \(map Δ [\d.]+\), pytorch-grad-cam [\d.e-]+ s: "
        + RATIO[1:]
    ),
    ("detections", "fasterrcnn_mobilenet_v3_large_320_fpn: 10 detections' Grad-CAM / forward"): (
        RATIO + r" \(forward [\d.e-]+ s; naive \d+\.\d\d×\)$"
    ),
    ("largest batch", "mobilenet_v3_small, 224², Grad-CAM"): r"^2 \(none failed up to 2\)$",
}
"""Every measurement of a tiny run, (part, measurement), and the form of its result."""
TESTS = ("GPU tests", "pytest")


def table(text: str, header: str) -> list[list[str]]:
    """The rows of the markdown table that starts with ``header``, as lists of cells."""
    lines = text.splitlines()
    start = lines.index(header) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


@pytest.mark.slow
def test_the_dry_run_measures_every_part_and_summarises_it(tmp_path: Path) -> None:
    environment = os.environ | {"OUT": str(tmp_path), "WHEELS": "", "PYTHON": sys.executable}
    finished = subprocess.run(
        [str(RUN), "--device", "cpu", "--size", "tiny", "--budget-s", "400"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout[-4000:]
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# camserve on cpu (cpu), torch ")
    results = table(summary, "| part | measurement | result | goal | verdict |")
    by_measurement = {(part, measured): result for part, measured, result, *_ in results}
    assert set(by_measurement) >= set(MEASURED)
    for key, form in MEASURED.items():
        assert re.search(form, by_measurement[key]), (key, by_measurement[key])
    passed = re.search(MEASURED[TESTS], by_measurement[TESTS])
    assert passed is not None
    assert int(passed[1]) >= 6
    statuses = {part: status for part, status, _ in table(summary, "| part | status | seconds |")}
    assert statuses.pop("engine overhead, bf16") == "not run: bf16 autocast runs on CUDA only"
    assert set(statuses.values()) == {"ok"}, statuses
    assert len(statuses) == 8
    parts = json.loads((tmp_path / "results.json").read_text())["parts"]
    assert [part["part"] for part in parts][:2] == ["environment", "GPU tests"]
    log = (tmp_path / "log.txt").read_text()
    assert all(f"===== {part}: ok in" in log for part in statuses)
    assert (tmp_path / "junit.xml").exists()
