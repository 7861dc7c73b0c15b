"""``GET /v1/models/{name}/report`` on in-process servers: the shipped ``shapes`` model's report
goes from queued through running to ready with real numbers, and so do the shipped detector's and
segmenter's (each scored as its task answers); a reload says how far the new
version's maps moved (none for the same weights, most for other weights), in the report, the log
and the metrics; unknown models and servers without reports answer 404."""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from camserve.engine.methods import METHODS
from camserve.quality.audit.sanity import SANITY_THRESHOLD
from tests.api.helpers import (
    ADMIN_HEADERS,
    assert_error,
    explicit_control,
    make_settings,
    serving,
)
from tests.harness.live_server import MetricsSnapshot
from tests.model_folders import manifest_text, write_whole
from tests.support import SHIPPED_MODELS, image_bytes

REPORT_LIMIT_S = 120.0
"""The shapes report takes about 8 s on two busy cores; a hang fails instead of blocking."""
REPORTED_METHODS = [method for method in METHODS if method != "scorecam"]

Body = dict[str, Any]


def poll_report(
    client: TestClient, model: str, until: Callable[[Body], bool], seen: list[Body] | None = None
) -> Body:
    """The model's report once ``until`` holds for it (every body seen goes into ``seen``)."""
    deadline = time.monotonic() + REPORT_LIMIT_S
    while True:
        response = client.get(f"/v1/models/{model}/report")
        assert response.status_code == 200, response.text
        body: Body = response.json()
        if seen is not None:
            seen.append(body)
        if until(body):
            return body
        assert body["state"] != "failed", body
        assert time.monotonic() < deadline, f"no report within {REPORT_LIMIT_S:g} s: {body}"
        time.sleep(0.02)


def ready(body: Body) -> bool:
    return bool(body["state"] == "ready")


@pytest.fixture(scope="module")
def shapes_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Body], str]:
    """Every body the route answered while the shipped ``shapes`` report was computed, and the
    version ``GET /v1/models`` names."""
    folder = tmp_path_factory.mktemp("reports")
    settings = make_settings(SHIPPED_MODELS, models=["shapes"], audit=True, audit_dir=folder)
    seen: list[Body] = []
    with serving(settings) as client:
        poll_report(client, "shapes", ready, seen)
        version = client.get("/v1/models").json()["models"][0]["model_version"]
    return seen, version


def test_the_report_goes_from_queued_through_running_to_ready(
    shapes_report: tuple[list[Body], str],
) -> None:
    seen, version = shapes_report
    states = [body["state"] for body in seen]
    order = ["queued", "running", "ready"]
    assert [order.index(state) for state in states] == sorted(order.index(s) for s in states)
    assert states[-1] == "ready"
    progress = [body["progress"] for body in seen]
    assert progress == sorted(progress)
    assert any(0.0 < body["progress"] < 1.0 for body in seen if body["state"] == "running")
    stages = {body["stage"] for body in seen}
    assert {"sanity: randomised fc", "sanity: randomised layer4"} <= stages
    final = seen[-1]
    assert (final["model"], final["model_version"]) == ("shapes", version)
    assert final["progress"] == 1.0
    assert final["reused"] is False
    assert final["drift"] is None
    assert len(final["key"]) == 16
    assert 0.0 < final["seconds"] < REPORT_LIMIT_S


def test_the_report_holds_each_methods_sanity_and_faithfulness(
    shapes_report: tuple[list[Body], str],
) -> None:
    report = shapes_report[0][-1]["report"]
    assert report["model"] == "shapes"
    assert report["images"] == ["circle.jpg", "cross.jpg", "square.jpg", "star.jpg", "triangle.jpg"]
    assert report["settings"] == {
        "methods": REPORTED_METHODS,
        "layers": ["layer4"],
        "road_percentiles": [70, 90],
        "curve_steps": 6,
        "seed": 0,
        "seeds": [0, 1, 2],
        "full_cascade": False,
    }
    rows = {row["method"]: row for row in report["rows"]}
    assert list(rows) == REPORTED_METHODS
    for row in rows.values():
        sanity, faithful = row["sanity"], row["faithfulness"]
        assert sanity["steps"] == ["fc", "layer4"]  # down to the rule's step, no further
        assert sanity["decisive_step"] == 1
        decisive = [curve[1] for curve in sanity["spearman_by_seed"]]
        assert sanity["decisive_range"] == [min(decisive), max(decisive)]
        below = {rank < SANITY_THRESHOLD for rank in decisive}
        verdict = "undecided" if len(below) == 2 else "pass" if below == {True} else "fail"
        assert (sanity["verdict"], sanity["passed"]) == (verdict, verdict == "pass")
        assert sanity["images"] == faithful["images"] == 5
        assert faithful["rank"]["of"] == len(REPORTED_METHODS)
        low, high = faithful["road_interval"]
        assert low <= faithful["road"] <= high
        assert 0.0 <= faithful["deletion_auc"] < faithful["insertion_auc"] <= 1.0
        assert faithful["road_percentiles"] == [70, 90]
        pairs = zip(faithful["road_morf"], faithful["road_lerf"], strict=True)
        assert all(morf < lerf for morf, lerf in pairs)  # the hot pixels matter more
    # Grad-CAM follows the weights; Eigen-CAM (class-agnostic) keeps ranking the image's pixels
    assert rows["gradcam"]["sanity"]["passed"] is True
    assert rows["gradcam"]["sanity"]["spearman"][1] < 0.2
    assert rows["eigencam"]["sanity"]["passed"] is False
    assert rows["gradcam"]["faithfulness"]["road"] > 0.2


def test_a_detector_and_a_segmenter_have_reports_scored_by_their_task(tmp_path: Path) -> None:
    settings = make_settings(
        SHIPPED_MODELS,
        models=["shapes-detector", "shapes-segmenter"],
        audit=True,
        audit_dir=tmp_path,
        audit_max_images=1,
    )
    with serving(settings) as client:
        detector = poll_report(client, "shapes-detector", ready)["report"]
        segmenter = poll_report(client, "shapes-segmenter", ready)["report"]
    assert (detector["task"], segmenter["task"]) == ("detection", "segmentation")
    assert "detection of the explained class" in detector["score"]
    assert "over the pixels the trained model gave it" in segmenter["score"]
    assert detector["settings"]["layers"] == ["backbone", "backbone[0]", "backbone[pool]"]
    assert segmenter["settings"]["layers"] == ["backbone.layer4"]
    for report, head in ((detector, "roi_heads"), (segmenter, "classifier")):
        rows = {(row["method"], row["layer"]): row for row in report["rows"]}
        layer = report["settings"]["layers"][0]
        assert rows[("eigencam", layer)]["sanity"]["steps"] == [head]
        assert rows[("eigencam", layer)]["sanity"]["passed"] is False  # blind to the head
        # Grad-CAM follows the head: below the threshold on average; on this one image, one
        # of the detector's three seeds keeps its map (undecided), never all of them
        gradcam = rows[("gradcam", layer)]["sanity"]
        assert gradcam["spearman"][gradcam["decisive_step"]] < SANITY_THRESHOLD, gradcam
        assert gradcam["verdict"] in {"pass", "undecided"}, gradcam
        for row in rows.values():
            faithful = row["faithfulness"]
            assert 0.0 <= faithful["deletion_auc"] <= 1.0
            assert 0.0 <= faithful["insertion_auc"] <= 1.0
    assert {entry["method"] for entry in segmenter["left_out"]} <= {"cam"}


def test_unknown_models_and_servers_without_reports_answer_404(models_dir: Path) -> None:
    with serving(make_settings(models_dir)) as client:
        assert "unknown model 'absent'" in assert_error(
            client.get("/v1/models/absent/report"), 404, "unknown_model"
        )
        assert "CAMSERVE_AUDIT=false" in assert_error(
            client.get("/v1/models/tiny/report"), 404, "reports_off"
        )


def reference_folder(folder: Path, count: int = 6) -> Path:
    folder.mkdir()
    for index in range(count):
        (folder / f"image-{index}.png").write_bytes(image_bytes(64, 48, seed=index))
    return folder


def serve_weights(folder: Path, weights: str) -> None:
    """The manifest of ``m`` on ``weights``, its reference images in ``ref/``."""
    write_whole(folder / "m.toml", manifest_text("m", weights) + 'audit_images = "ref"\n')


def reload(client: TestClient) -> Body:
    """Load the manifest's new version; its report once the drift is known."""
    loaded = client.post("/v2/repository/models/m/load", headers=ADMIN_HEADERS)
    assert loaded.status_code == 200, loaded.text
    version = loaded.json()["version"]
    return poll_report(
        client, "m", lambda body: body["model_version"] == version and body["drift"] is not None
    )


def drift_metrics(client: TestClient, method: str) -> tuple[float, float]:
    snapshot = MetricsSnapshot.parse(client.get("/metrics").text)
    return (
        snapshot.value("camserve_explanation_drift_moved_ratio", model="m", method=method),
        snapshot.value("camserve_explanation_drift_rank_correlation", model="m", method=method),
    )


def test_a_reload_reports_how_far_the_maps_moved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = explicit_control(
        tmp_path, audit=True, audit_dir=tmp_path / "reports", log_level="info"
    )
    reference_folder(tmp_path / "ref")
    serve_weights(tmp_path, "a.pt")
    shutil.copy(tmp_path / "a.pt", tmp_path / "same.pt")
    caplog.set_level(logging.INFO, logger="camserve.quality.served.reports")
    with serving(settings) as client:
        first = poll_report(client, "m", ready)
        assert first["report"]["images"] == [f"image-{index}.png" for index in range(6)]

        serve_weights(tmp_path, "same.pt")  # a new version with the same weights
        same = reload(client)
        assert same["drift"]["previous_version"] == first["model_version"]
        assert same["drift"]["changed_predictions"] == []
        rows = same["drift"]["rows"]
        assert [row["method"] for row in rows] == REPORTED_METHODS
        assert all(row["moved_ratio"] == 0.0 for row in rows)
        assert all(row["mean_spearman"] == 1.0 for row in rows)
        assert drift_metrics(client, "gradcam") == (0.0, 1.0)

        serve_weights(tmp_path, "b.pt")  # other weights
        other = reload(client)
        assert other["drift"]["previous_version"] == same["model_version"]
        gradcam = next(row for row in other["drift"]["rows"] if row["method"] == "gradcam")
        assert gradcam["moved_ratio"] > 0.5
        assert gradcam["mean_spearman"] < 0.5
        assert [image["moved"] for image in gradcam["images"]].count(True) == round(
            6 * gradcam["moved_ratio"]
        )
        moved, rank = drift_metrics(client, "gradcam")
        assert (moved, rank) == (gradcam["moved_ratio"], gradcam["mean_spearman"])
    lines = [record.getMessage() for record in caplog.records if "reloaded" in record.getMessage()]
    assert len(lines) == 2
    assert "the new version's cam moved for 0 % of the 6 reference images" in lines[0]
    assert f"gradcam for {round(100 * gradcam['moved_ratio'])} % ({rank:.2f})" in lines[1]
