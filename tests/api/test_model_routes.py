"""``GET /v1/models``: what each served model offers, and the models that failed to load."""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from camserve.api.application import create_app
from camserve.api.model_routes import list_models
from camserve.engine.methods import METHODS
from camserve.serving.service import Service
from tests.api.helpers import assert_error, make_settings, post_image, serving
from tests.support import TINY_LABELS, write_test_models

MODEL_FIELDS = {
    "name",
    "model_version",
    "load_error",
    "score_cam_seconds",
    "architecture",
    "task",
    "description",
    "weights",
    "num_classes",
    "labels",
    "default_layer",
    "default_method",
    "candidate_layers",
    "methods",
    "cam_layers",
    "input_size",
    "device",
}
DEADLINE_S = 45.5
"""The module's server deadline: not the default, so that the listing is seen to report it."""


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """``tiny`` and ``mini`` load; ``broken`` names a checkpoint file that does not exist."""
    folder = write_test_models(tmp_path_factory.mktemp("models"))
    (folder / "broken.toml").write_text(
        'name = "broken"\narchitecture = "resnet18"\nweights = "missing-checkpoint.pt"\n'
        "num_classes = 3\ninput_size = 64\n"
    )
    with serving(make_settings(folder, request_timeout_s=DEADLINE_S)) as client:
        yield client


@pytest.fixture(scope="module")
def listing(client: TestClient) -> dict[str, Any]:
    response = client.get("/v1/models")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def model(listing: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [entry for entry in listing["models"] if entry["name"] == name]
    assert len(found) == 1
    return found[0]


def test_models_lists_the_loaded_models_only(listing: dict[str, Any]) -> None:
    assert set(listing) == {
        "models",
        "default_model",
        "failed",
        "request_timeout_s",
        "model_control",
        "poll_interval_s",
    }
    assert (listing["model_control"], listing["poll_interval_s"]) == ("none", 5.0)
    assert [entry["name"] for entry in listing["models"]] == ["mini", "tiny"]  # by name
    assert listing["default_model"] == "mini"
    for entry in listing["models"]:
        assert set(entry) == MODEL_FIELDS


def test_tiny_model_fields(listing: dict[str, Any]) -> None:
    tiny = model(listing, "tiny")
    assert tiny["architecture"] == "resnet18"
    assert tiny["num_classes"] == 10
    assert tiny["labels"] == TINY_LABELS
    assert tiny["default_layer"] == "layer4"
    assert tiny["default_method"] == "gradcam"
    assert tiny["input_size"] == [64, 64]
    assert tiny["device"] == "cpu"
    assert tiny["methods"] == list(METHODS)
    assert isinstance(tiny["weights"], str)
    assert tiny["weights"]
    assert tiny["description"] == ""


def test_score_cam_estimates_follow_each_layers_channel_count(listing: dict[str, Any]) -> None:
    """One measured time per masked pass, times the layer's channels: ResNet-18's layer4 has
    512 channels, layer1 64; every offered layer has its estimate."""
    tiny = model(listing, "tiny")
    seconds = tiny["score_cam_seconds"]
    assert set(tiny["candidate_layers"]) <= set(seconds)
    assert seconds["layer1"] > 0
    assert seconds["layer4"] / seconds["layer1"] == pytest.approx(512 / 64)
    assert seconds["layer3"] / seconds["layer1"] == pytest.approx(256 / 64)


def test_the_listing_names_the_deadline_score_cam_estimates_are_held_to(
    client: TestClient, listing: dict[str, Any]
) -> None:
    """The page compares each layer's estimate with this deadline, so it is the server's own
    setting, and the schema says what it bounds."""
    assert listing["request_timeout_s"] == DEADLINE_S
    schema = client.get("/openapi.json").json()["components"]["schemas"]["ModelsResponse"]
    assert "request_timeout_s" in schema["required"]
    described = schema["properties"]["request_timeout_s"]
    assert described["type"] == "number"
    assert "CAMSERVE_REQUEST_TIMEOUT_S" in described["description"]
    assert "over_deadline" in described["description"]


def test_candidate_layers_are_in_execution_order_and_include_the_default(
    listing: dict[str, Any],
) -> None:
    candidates = model(listing, "tiny")["candidate_layers"]
    assert "layer4" in candidates
    assert candidates.index("layer1") < candidates.index("layer2") < candidates.index("layer4")
    assert "fc" not in candidates  # no spatial output
    assert "avgpool" not in candidates  # 1×1: no spatial information
    assert len(candidates) == len(set(candidates))


def test_cam_layers_are_exactly_where_a_cam_request_answers(
    client: TestClient, listing: dict[str, Any]
) -> None:
    tiny, mini = model(listing, "tiny"), model(listing, "mini")
    assert tiny["cam_layers"] == ["layer4.1", "layer4"], "resnet18: the map the head pools"
    assert mini["cam_layers"] == [], "mobilenet_v3_small: two linear layers after the pooling"
    answers = {
        layer: post_image(client, params={"model": "tiny", "method": "cam", "layer": layer})
        for layer in tiny["candidate_layers"]
    }
    answered = [layer for layer, answer in answers.items() if answer.status_code == 200]
    assert answered == tiny["cam_layers"]
    for layer, answer in answers.items():
        if layer not in answered:
            message = assert_error(answer, 422, "method_not_applicable")
            assert "CAM needs the target layer to feed global average pooling" in message
    refused = post_image(client, params={"model": "mini", "method": "cam"})
    assert_error(refused, 422, "method_not_applicable")


def test_mini_model_fields(listing: dict[str, Any]) -> None:
    mini = model(listing, "mini")
    assert mini["architecture"] == "mobilenet_v3_small"
    assert mini["num_classes"] == 5
    assert len(mini["labels"]) == 5
    assert len(set(mini["labels"])) == 5
    assert mini["default_layer"] in mini["candidate_layers"]
    assert mini["methods"] == list(METHODS)
    assert mini["device"] == "cpu"


def test_a_model_that_fails_to_load_is_listed_with_its_reason(listing: dict[str, Any]) -> None:
    assert set(listing["failed"]) == {"broken"}
    message = listing["failed"]["broken"]
    assert "broken" in message
    assert "missing-checkpoint.pt" in message


def test_readiness_reports_the_failed_model_while_the_others_serve(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["ready"] is True
    assert body["models"] == {"broken": "failed", "mini": "ready", "tiny": "ready"}
    assert set(body["failed"]) == {"broken"}


def test_the_other_models_serve(client: TestClient) -> None:
    for name in ("tiny", "mini"):
        response = post_image(client, params={"model": name})
        assert response.status_code == 200, response.text
        assert response.headers["x-camserve-model"] == name


@pytest.mark.parametrize("route", ["/v1/cam", "/v1/explain"])
def test_the_failed_model_answers_503_with_the_reason_models_lists(
    client: TestClient, listing: dict[str, Any], route: str
) -> None:
    response = post_image(client, route, params={"model": "broken"})
    message = assert_error(response, 503, "model_unavailable")
    reason = listing["failed"]["broken"].removeprefix("model 'broken': ")
    assert "missing-checkpoint.pt" in reason
    assert message == (
        f"model 'broken' is configured but failed to load: {reason}; served models: mini, tiny"
    )
    assert "retry-after" not in response.headers  # no wait brings it back


def test_the_failed_models_kserve_readiness_is_503_with_the_reason(client: TestClient) -> None:
    message = assert_error(client.get("/v1/models/broken"), 503, "model_unavailable")
    assert "missing-checkpoint.pt" in message


def test_unknown_model_is_404_listing_the_served_models(client: TestClient) -> None:
    message = assert_error(post_image(client, params={"model": "nope"}), 404, "unknown_model")
    assert "'nope'" in message
    assert "mini" in message
    assert "tiny" in message


def test_the_listing_matches_what_the_engines_serve(client: TestClient) -> None:
    engines = client.app.state.service.worker._engines  # type: ignore[attr-defined]
    assert sorted(engines) == ["mini", "tiny"]
    for name, engine in engines.items():
        response = client.get("/v1/models").json()
        entry = model(response, name)
        assert entry["default_layer"] == engine.layer
        assert entry["candidate_layers"] == engine.candidate_layers


LOADING_MODELS = 6


def write_small_models(folder: Path, count: int) -> list[str]:
    """``count`` manifests of the demo architecture with random weights at 32×32: each loads
    and warms up in tens of milliseconds, so models keep arriving while the test asks."""
    names = [f"small{index:02d}" for index in range(count)]  # load order: by file name
    for name in names:
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\narchitecture = "shapes_resnet"\nweights = "random"\n'
            "input_size = 32\n"
        )
    return names


async def listings_while_loading(service: Service) -> list[list[str]]:
    """The route's answer, asked for again and again until loading is over, then once more."""
    listings: list[list[str]] = []
    while not service.hub.finished.is_set():
        listings.append([entry.name for entry in (await list_models(service)).models])
    listings.append([entry.name for entry in (await list_models(service)).models])
    return listings


def test_models_answers_from_one_snapshot_while_several_models_load(tmp_path: Path) -> None:
    """The worker thread adds each model as it is ready; the listing must never see the hub
    half-written (before the fix, iterating the hub's dict while a model was added failed with
    "dictionary changed size during iteration"). The route is called without the HTTP layer
    around it, so most of the time goes to building the listing, and a tiny GIL switch interval
    makes the two threads interleave at almost every bytecode."""
    names = write_small_models(tmp_path, LOADING_MODELS)
    previous_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with TestClient(create_app(make_settings(tmp_path))) as client:
            service: Service = client.app.state.service  # type: ignore[attr-defined]
            listings = asyncio.run(listings_while_loading(service))
            readiness = client.get("/readyz")
    finally:
        sys.setswitchinterval(previous_interval)
    assert readiness.status_code == 200, readiness.text
    assert readiness.json()["models"] == dict.fromkeys(names, "ready")
    assert listings[-1] == names
    assert len(listings) > 1  # the listing was asked for while models were loading
    for before, after in itertools.pairwise(listings):
        assert after[: len(before)] == before  # a model once listed stays, in load order
