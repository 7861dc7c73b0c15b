"""The GPU run's runner and summary: a part that fails or outlives its limit is reported and
ended with everything it started, the budget decides what still starts, and the summary's rows
carry the ratios and verdicts of the goals."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from benchmarks.gpu import run
from benchmarks.gpu.parts import Part, parts
from benchmarks.gpu.summary import Outcome, markdown, memory_row, overhead_rows, rows

SLEEPER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead, only not yet reaped
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_part_past_its_limit_is_ended_with_what_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run, "LEAST_USEFUL_S", 0.0)
    pid_file = tmp_path / "child.pid"
    part = Part("sleeper", ["-c", SLEEPER, str(pid_file)], limit_s=3.0)
    started = time.monotonic()
    outcome = run.run_part(part, time.monotonic() + 60, tmp_path)
    assert outcome.status == "timed out after 3 s"
    assert 3.0 <= time.monotonic() - started < 20.0
    assert outcome.data is None
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_a_failing_part_is_reported_with_its_exit_status(tmp_path: Path) -> None:
    part = Part("failing", ["-c", "raise SystemExit(3)"], limit_s=60.0)
    outcome = run.run_part(part, time.monotonic() + 60, tmp_path)
    assert (outcome.part, outcome.status, outcome.data) == ("failing", "failed (exit 3)", None)


def test_a_part_reads_back_the_json_it_wrote(tmp_path: Path) -> None:
    write = f"open({str(tmp_path / 'out.json')!r}, 'w').write('{{\"rows\": [1, 2]}}')"
    part = Part("writer", ["-c", write], limit_s=60.0, output="out.json")
    outcome = run.run_part(part, time.monotonic() + 60, tmp_path)
    assert (outcome.status, outcome.data) == ("ok", {"rows": [1, 2]})


def test_no_part_starts_once_the_budget_is_spent_or_where_it_cannot_run(tmp_path: Path) -> None:
    late = run.run_part(Part("late", ["-c", "pass"], 60.0), time.monotonic() + 5, tmp_path)
    assert late.status == "not run: the run's time budget was spent"
    skipped = Part("bf16", ["-c", "pass"], 60.0, not_run="bf16 autocast runs on CUDA only")
    outcome = run.run_part(skipped, time.monotonic() + 60, tmp_path)
    assert outcome.status == "not run: bf16 autocast runs on CUDA only"


def test_a_full_run_measures_the_sizes_the_issue_names(tmp_path: Path) -> None:
    commands = {part.name: " ".join(part.command) for part in parts("full", "cuda", tmp_path)}
    assert "--models resnet50 vit_b_16 --batch-sizes 64" in commands["engine overhead, fp32"]
    assert "--autocast bf16 --json" in commands["engine overhead, bf16"]
    assert "--batch-sizes 32 --pairs 3" in commands["HTTP"]
    assert "-k gpu or cuda" in commands["GPU tests"]
    assert all("--device cuda" in commands[name] for name in list(commands)[2:])


def overhead(forward: float, camserve: float, peer: float | None) -> dict[str, object]:
    seconds = {"forward": forward, "camserve": camserve, "camserve_top5": 2 * camserve}
    if peer is not None:
        seconds["pytorch_grad_cam"] = peer
    return {"rows": [{"model": "resnet50", "batch": 64, "seconds_per_image": seconds}]}


def test_the_engine_overhead_rows_hold_grad_cam_to_1_10_times_the_forward() -> None:
    met = list(overhead_rows("fp32")(overhead(0.002, 0.0022, 0.006)))
    assert met[0][1:] == (
        "resnet50, batch 64: Grad-CAM / forward",
        "1.10× (0.0022 vs 0.002 s/img)",
        "≤ 1.10×",
        "met",
    )
    assert met[1][2] == "3.00×"
    missed = list(overhead_rows("bf16")(overhead(0.002, 0.0023, None)))
    assert [row[1] for row in missed] == [
        "resnet50, batch 64: Grad-CAM / forward",
        "resnet50, batch 64: top-5 Grad-CAM / forward",
    ]
    assert (missed[0][2], missed[0][4]) == ("1.15× (0.0023 vs 0.002 s/img)", "**NOT met**")


def test_the_memory_row_reports_the_growth_after_the_first_cycle() -> None:
    record = {
        "device": "cuda",
        "requests": 500,
        "readings": [100 * 2**20, 100 * 2**20, 101.5 * 2**20],
    }
    _, _, result, goal, verdict = memory_row(record)
    assert result == "100.0 MiB after the first cycle, then at most +1.50 MiB over 500 requests"
    assert (goal, verdict) == ("flat (≤ +1 MiB)", "**NOT met**")


def test_a_part_without_results_gets_one_row_that_says_why() -> None:
    timed_out = Outcome("HTTP", "timed out after 120 s", 120.0, None)
    assert rows(timed_out) == [("HTTP", "—", "timed out after 120 s", "", "")]
    summary = markdown("camserve on cuda", [timed_out])
    assert "| HTTP | timed out after 120 s | 120 |" in summary.splitlines()


def test_the_tests_results_come_from_the_junit_report_and_the_records(tmp_path: Path) -> None:
    (tmp_path / "junit.xml").write_text(
        '<testsuites><testsuite name="pytest" tests="10" failures="1" errors="1" skipped="3">'
        "</testsuite></testsuites>"
    )
    (tmp_path / "records.jsonl").write_text(json.dumps({"check": "maps"}) + "\n")
    assert run.test_results(tmp_path) == {
        "counts": {"passed": 5, "failed": 2, "skipped": 3},
        "records": [{"check": "maps"}],
    }
