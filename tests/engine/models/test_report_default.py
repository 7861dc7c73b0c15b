"""A default explanation chosen by measurement: the shipped ``shapes`` model's audit report on
three of its samples picks the most faithful pair that passes the sanity check, which becomes
the model's default where its manifest names none; a manifest's own choice still wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from camserve.engine.engine import CamEngine
from camserve.engine.errors import ManifestError
from camserve.engine.fusion import default_explanation
from camserve.engine.models.manifest import load_manifest
from camserve.engine.models.manifest_folder import load_manifests
from camserve.engine.models.registry import load_model
from camserve.engine.models.report_default import ReportRow, most_faithful_passing, read_report_rows
from camserve.quality.audit.files import audit_json
from camserve.quality.audit.run import AuditSettings, run_audit
from camserve.quality.audit.subjects import audited
from camserve.quality.datasets import samples_from_folder
from camserve.serving.tasks.classifier import load_classifier
from camserve.serving.tasks.interface import Placement
from tests.support import SHIPPED_MODELS

SAMPLES = (
    Path(__file__).resolve().parents[3]
    / "app"
    / "camserve"
    / "web"
    / "static"
    / "samples"
    / "shapes"
)
SETTINGS = AuditSettings(
    methods=("gradcam", "layercam", "eigencam"),
    layers=("layer3", "layer4"),
    percentiles=(30, 70),
    curve_steps=3,
)
MANIFEST = (
    'name = "shapes"\narchitecture = "shapes_resnet"\n'
    f'weights = "{SHIPPED_MODELS / "shapes.pt"}"\n'
    'labels = ["circle", "square", "triangle", "star", "cross"]\n'
    'input_size = [128, 128]\nresize = "letterbox"\n'
    "mean = [0.485, 0.456, 0.406]\nstd = [0.229, 0.224, 0.225]\n"
    'default_from_report = "audit.json"\n'
)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shapes model's audit report, written as ``camserve audit`` writes its JSON."""
    (spec,) = [spec for spec in load_manifests(SHIPPED_MODELS) if spec.name == "shapes"]
    engine = CamEngine.from_loaded(load_model(spec), device="cpu")
    samples, _ = samples_from_folder(SAMPLES, None, engine.class_index)
    torch.manual_seed(0)
    audit = run_audit(audited(engine), samples[:3], SETTINGS, model="shapes", version="test")
    folder = tmp_path_factory.mktemp("report")
    (folder / "audit.json").write_text(json.dumps(audit_json(audit)))
    return folder / "audit.json"


def _manifest(report: Path, extra: str = "") -> Path:
    path = report.parent / "shapes.toml"
    path.write_text(MANIFEST + extra)
    return path


def test_the_report_has_passing_and_failing_pairs(report: Path) -> None:
    rows = read_report_rows(report)
    assert {(row.method, row.layer) for row in rows} == {
        (method, layer) for method in SETTINGS.methods for layer in SETTINGS.layers
    }
    verdicts = {(row.method, row.layer): row.passed for row in rows}
    assert verdicts[("gradcam", "layer4")]  # tests/quality/audit/test_sanity.py
    assert not all(verdicts.values())  # Eigen-CAM is blind to the classifier


def test_a_manifest_without_method_or_layer_serves_the_reports_choice(report: Path) -> None:
    rows = read_report_rows(report)
    best = max((row for row in rows if row.passed), key=lambda row: row.road)
    loaded = load_model(load_manifest(_manifest(report)))
    assert default_explanation(loaded) == (best.method, best.layer)
    assert all(row.road <= best.road or not row.passed for row in rows)
    placement = Placement(torch.device("cpu"), None, score_cam_batch_size=64)
    _engine, served = load_classifier(load_manifest(_manifest(report)), placement)
    assert (served.method, served.layer) == (best.method, best.layer)


def test_the_manifests_method_wins_and_the_report_picks_its_layer(report: Path) -> None:
    rows = [row for row in read_report_rows(report) if row.method == "gradcam" and row.passed]
    best = max(rows, key=lambda row: row.road)
    loaded = load_model(load_manifest(_manifest(report, 'method = "GradCAM"\n')))
    assert default_explanation(loaded) == ("gradcam", best.layer)


def test_a_manifest_that_names_method_and_layer_keeps_both(report: Path) -> None:
    manifest = _manifest(report, 'method = "eigencam"\nlayer = "layer3"\n')
    assert default_explanation(load_model(load_manifest(manifest))) == ("eigencam", "layer3")


def test_without_a_report_the_manifest_or_the_family_decides() -> None:
    (spec,) = [spec for spec in load_manifests(SHIPPED_MODELS) if spec.name == "shapes"]
    assert default_explanation(load_model(spec)) == ("gradcam", "layer4")
    (spec,) = [s for s in load_manifests(SHIPPED_MODELS) if s.name == "efficientnet_lite0"]
    assert default_explanation(load_model(spec)) == ("layercam", "fused")


def test_a_missing_or_foreign_report_names_the_problem(report: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read"):
        read_report_rows(report.parent / "absent.json")
    foreign = report.parent / "foreign.json"
    foreign.write_text('{"rows": [{"method": "gradcam"}]}')
    with pytest.raises(ManifestError, match="not a camserve audit report"):
        read_report_rows(foreign)


def _row(method: str, layer: str, passed: bool, road: float, gain: float = 0.0) -> ReportRow:
    return ReportRow(method, layer, passed, road, insertion_auc=0.5 + gain, deletion_auc=0.5)


def test_the_choice_skips_failures_breaks_ties_and_may_find_nothing() -> None:
    rows = [
        _row("eigencam", "bn2", passed=False, road=0.9),
        _row("gradcam", "bn2", passed=True, road=0.4, gain=0.1),
        _row("layercam", "fused", passed=True, road=0.4, gain=0.2),
        _row("gradcam", "blocks.6", passed=True, road=0.3),
    ]
    chosen = most_faithful_passing(rows)
    assert chosen is not None
    assert (chosen.method, chosen.layer) == ("layercam", "fused")
    chosen = most_faithful_passing(rows, layer="bn2")
    assert chosen is not None
    assert chosen.method == "gradcam"
    assert most_faithful_passing(rows, method="eigencam") is None
