"""What the reports hold per model before their thread runs: a queued report for each version the
worker makes current (a classifier's, a segmenter's), ``unsupported`` for an engine served
without a manifest (no version), none after the model is removed, and nothing at all on a server
whose reports are off."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from camserve.config import Settings
from camserve.quality.served.reports import ExplanationReports
from camserve.serving.errors import ReportsOffError
from camserve.serving.live_versions import LiveVersion
from camserve.serving.prometheus import Metrics
from camserve.serving.served_model import ServedModel
from camserve.serving.worker import BatchingWorker
from tests.serving.test_worker import make_worker, small_engine

ROOT = Path(__file__).resolve().parents[3]


def served(version: str, task: str = "classification") -> ServedModel:
    return ServedModel(
        name="small",
        architecture="small",
        weights="random",
        description="",
        layer="features",
        method="gradcam",
        candidate_layers=["features"],
        layer_names=frozenset({"features"}),
        labels=["a", "b", "c", "d", "e"],
        input_size=(32, 32),
        device="cpu",
        task=task,  # type: ignore[arg-type]
        version=version,
    )


def reports(tmp_path: Path, *, audit: bool = True) -> tuple[ExplanationReports, BatchingWorker]:
    worker, _ = make_worker({})
    settings = Settings(_env_file=None, audit=audit, audit_dir=tmp_path)  # type: ignore[call-arg]
    return ExplanationReports(settings, worker, Metrics()), worker


def test_each_new_version_is_queued_and_a_bare_engine_is_unsupported(tmp_path: Path) -> None:
    kept, worker = reports(tmp_path)
    assert worker.version_announcer.observer is kept
    first = LiveVersion(small_engine(), served("v1"))
    worker.version_announcer.installed("small", first)
    assert kept.report_of(served("v1"))["state"] == "queued"
    worker.version_announcer.installed("small", LiveVersion(small_engine(), served("v2")), first)
    body = kept.report_of(served("v2"))
    assert (body["model_version"], body["state"], body["progress"]) == ("v2", "queued", 0.0)
    assert len(kept._jobs) == 1  # v1's queued report was dropped for v2's
    worker.version_announcer.installed(
        "small", LiveVersion(small_engine(), served("v3", "segmentation"))
    )
    assert kept.report_of(served("v3", "segmentation"))["state"] == "queued"
    assert len(kept._jobs) == 1  # v3's replaced v2's
    worker.version_announcer.installed("small", LiveVersion(small_engine()))
    body = kept.report_of(served(""))
    assert body["state"] == "unsupported"
    assert body["message"] == "a bare engine, served under no manifest, has no report"
    assert len(kept._jobs) == 0


def test_a_removed_model_has_no_report_left(tmp_path: Path) -> None:
    kept, worker = reports(tmp_path)
    worker.version_announcer.installed("small", LiveVersion(small_engine(), served("v1")))
    worker.version_announcer.removed("small")
    assert len(kept._jobs) == 0
    assert kept.report_of(served("v1"))["stage"] == ""  # a placeholder: nothing known


def test_reports_off_observe_nothing_and_answer_an_error(tmp_path: Path) -> None:
    kept, worker = reports(tmp_path, audit=False)
    assert worker.version_announcer.observer is None
    with pytest.raises(ReportsOffError, match="CAMSERVE_AUDIT=false"):
        kept.report_of(served("v1"))


THREAD_COUNT_AFTER_REPORTS = """
import tempfile, torch
from pathlib import Path
from tests.quality.served.test_reports import reports
torch.set_num_threads(2)
kept, _worker = reports(Path(tempfile.mkdtemp()))
kept.start()
kept.stop(timeout=30)
assert not kept._thread.is_alive()
print(torch.get_num_threads())
"""


def test_the_reports_thread_leaves_the_process_thread_count_alone() -> None:
    """torch's thread count is the whole process's: the reports' thread once set it to one, and
    from then on every request's pass ran on one thread (issue 54: a Score-CAM 1.6 times as long
    while a report computed). In a fresh process, as in a server: under pytest, whose main
    thread has set the count itself, another thread's setting did not show."""
    finished = subprocess.run(
        [sys.executable, "-c", THREAD_COUNT_AFTER_REPORTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert finished.stdout.split() == ["2"]
