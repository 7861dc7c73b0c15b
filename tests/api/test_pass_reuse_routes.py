"""Kept passes behind the routes: another method, class, layer set or drawing of an image asked
about before runs no new pass (``X-Camserve-Pass: reused``) and answers what a server that
keeps nothing answers; what the kept pass lacks (a layer, a class's gradient) runs the model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from camserve.serving.service import Service
from tests.api.helpers import (
    ADMIN_HEADERS,
    assert_same_explain_body,
    explicit_control,
    make_settings,
    post_image,
    serving,
)
from tests.harness.live_server import MetricsSnapshot
from tests.model_folders import write_manifest
from tests.support import image_bytes

ONE_PER_BATCH = {"models": ["tiny"], "max_batch_size": 1}


@pytest.fixture(scope="module")
def servers(models_dir: Path) -> Iterator[tuple[TestClient, TestClient]]:
    """A server that keeps passes, and one that keeps nothing (the reference)."""
    with (
        serving(make_settings(models_dir, pass_cache_mb=16, **ONE_PER_BATCH)) as keeping,
        serving(make_settings(models_dir, pass_cache_mb=0, **ONE_PER_BATCH)) as plain,
    ):
        yield keeping, plain


def explain(client: TestClient, image: bytes, **params: Any) -> tuple[dict[str, Any], str]:
    query = {"model": "tiny", "include": "raw_map,heatmap,overlay", **params}
    response = post_image(client, "/v1/explain", image, params=query)
    assert response.status_code == 200, response.text
    return response.json(), response.headers["x-camserve-pass"]


def reuses(client: TestClient) -> float:
    return MetricsSnapshot.parse(client.get("/metrics").text).value("camserve_pass_reuses_total")


def test_a_control_change_reuses_the_pass_and_answers_as_a_new_pass_would(
    servers: tuple[TestClient, TestClient],
) -> None:
    keeping, plain = servers
    image = image_bytes(seed=301)
    first, how = explain(keeping, image, method="gradcam", top_k=3)
    assert how == "computed"
    third_class = first["explanations"][2]["class_index"]
    steps: list[dict[str, Any]] = [
        {"method": "gradcam++,xgradcam,hirescam", "top_k": 3},
        {"method": "layercam", "target": str(third_class), "colormap": "viridis", "alpha": 0.3},
        {"method": "eigencam,cam", "top_k": 2},
        {"method": "gradcam", "top_k": 1, "threshold": "0.7", "include": "boxes,heatmap"},
    ]
    before = reuses(keeping)
    for params in steps:
        got, how = explain(keeping, image, **params)
        want, _ = explain(plain, image, **params)
        assert how == "reused", params
        assert_same_explain_body(got, want, tol=1e-5)
    assert reuses(keeping) - before == len(steps)


def test_what_the_kept_pass_lacks_runs_the_model_and_is_kept_in_turn(
    servers: tuple[TestClient, TestClient],
) -> None:
    keeping, plain = servers
    image = image_bytes(seed=302)
    explain(keeping, image, method="gradcam", top_k=2)
    fifth_class = explain(plain, image, method="gradcam", top_k=5)[0]["explanations"][4]
    wanted: list[tuple[dict[str, Any], str]] = [
        ({"method": "gradcam", "layer": "layer3"}, "computed"),  # a layer not hooked before
        ({"method": "layercam", "layer": "layer3,layer4"}, "reused"),  # both kept now
        ({"method": "gradcam", "target": str(fifth_class["class_index"])}, "computed"),
        ({"method": "gradcam++", "target": str(fifth_class["class_index"])}, "reused"),
        ({"method": "scorecam", "top_k": 1}, "reused"),  # masked passes on the kept activations
        ({"method": "scorecam", "top_k": 1, "colormap": "gray"}, "reused"),  # its kept map
    ]
    for params, expected in wanted:
        got, how = explain(keeping, image, **params)
        assert how == expected, params
        assert_same_explain_body(got, explain(plain, image, **params)[0], tol=1e-5)


def test_another_image_or_the_same_pixels_in_another_file(
    servers: tuple[TestClient, TestClient],
) -> None:
    keeping, _ = servers
    explain(keeping, image_bytes(seed=303), method="gradcam")
    assert explain(keeping, image_bytes(seed=304), method="gradcam++")[1] == "computed"
    as_bmp = image_bytes(seed=303, image_format="BMP")  # the same pixels, other bytes
    assert explain(keeping, as_bmp, method="gradcam++")[1] == "reused"


def test_the_store_is_bounded_and_its_gauge_follows(models_dir: Path) -> None:
    settings = make_settings(models_dir, pass_cache_mb=0.05, **ONE_PER_BATCH)  # ~52 kB
    with serving(settings) as client:
        for seed in range(305, 312):
            explain(client, image_bytes(seed=seed), method="gradcam", top_k=3)
        service: Service = client.app.state.service  # type: ignore[attr-defined]
        store = service.worker.passes
        assert store is not None
        snapshot = MetricsSnapshot.parse(client.get("/metrics").text)
        assert 0 < store.bytes_held <= 0.05 * 1024 * 1024
        assert snapshot.value("camserve_pass_bytes") == store.bytes_held
        assert snapshot.value("camserve_pass_evictions_total") >= 1
        assert explain(client, image_bytes(seed=305), method="gradcam")[1] == "computed"
        assert explain(client, image_bytes(seed=311), method="gradcam")[1] == "reused"


def test_off_keeps_nothing(servers: tuple[TestClient, TestClient]) -> None:
    _, plain = servers
    image = image_bytes(seed=312)
    explain(plain, image, method="gradcam")
    assert explain(plain, image, method="gradcam++")[1] == "computed"
    assert reuses(plain) == 0


def test_a_reload_forgets_the_models_passes(tmp_path: Path) -> None:
    with serving(explicit_control(tmp_path, pass_cache_mb=16)) as client:
        image = image_bytes(seed=313)
        query = {"model": "m", "include": "raw_map"}
        post_image(client, "/v1/explain", image, params={**query, "method": "gradcam"})
        service: Service = client.app.state.service  # type: ignore[attr-defined]
        assert service.worker.passes is not None
        assert len(service.worker.passes) == 1
        write_manifest(tmp_path, "m", "b.pt")
        assert client.post("/v2/repository/models/m/load", headers=ADMIN_HEADERS).status_code == 200
        assert len(service.worker.passes) == 0
        again = post_image(client, "/v1/explain", image, params={**query, "method": "layercam"})
        assert again.headers["x-camserve-pass"] == "computed"
