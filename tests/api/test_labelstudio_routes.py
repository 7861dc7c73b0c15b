"""The Label Studio ML backend under ``/labelstudio``: health, setup, predict, webhook, auth."""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from label_studio_sdk.converter.brush import decode_rle
from label_studio_sdk.label_interface.interface import LabelInterface

from camserve import __version__
from tests.api.helpers import decode, make_settings, post_image, serving, worker_hook_count
from tests.harness.live_server import MetricsSnapshot
from tests.labeling.image_hosts import Host, elsewhere_routes, host_and_port, running
from tests.support import SHIPPED_MODELS, TINY_LABELS, image_bytes
from tests.tolerances import assert_within

WIDTH, HEIGHT = 96, 72
IMAGE = image_bytes(WIDTH, HEIGHT, seed=7)
THRESHOLD = "0.4"
ROOT = Path(__file__).resolve().parents[2]


def label_tags(tag: str, labels: list[str], extra: str = "") -> str:
    return "".join(f'<{tag} value="{label}"{extra}/>' for label in labels)


def config(choices: list[str] = TINY_LABELS, choices_extra: str = "") -> str:
    """A project with all four controls on one image; regions may be any tiny-model class."""
    return (
        '<View><Image name="photo" value="$picture"/>'
        f'<RectangleLabels name="box" toName="photo">{label_tags("Label", TINY_LABELS)}'
        "</RectangleLabels>"
        f'<PolygonLabels name="outline" toName="photo">{label_tags("Label", TINY_LABELS)}'
        "</PolygonLabels>"
        f'<BrushLabels name="mask" toName="photo">{label_tags("Label", TINY_LABELS)}</BrushLabels>'
        f'<Choices name="kind" toName="photo">{label_tags("Choice", choices, choices_extra)}'
        "</Choices></View>"
    )


@pytest.fixture(scope="module")
def image_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("documents")
    (root / "scenes").mkdir()
    (root / "scenes" / "one.png").write_bytes(IMAGE)
    (root / "big.png").write_bytes(image_bytes(400, 400, seed=3))
    (root.parent / "secret.png").write_bytes(IMAGE)
    return root


@pytest.fixture(scope="module")
def client(models_dir: Path, image_root: Path) -> Iterator[TestClient]:
    settings = make_settings(
        models_dir,
        default_model="tiny",
        local_files_document_root=image_root,
        labelstudio_threshold=THRESHOLD,
        labelstudio_regions="all",
        max_upload_bytes=200_000,
    )
    with serving(settings) as client:
        yield client


def task(reference: str, task_id: int = 1) -> dict[str, Any]:
    return {"id": task_id, "data": {"picture": reference}, "project": 3}


LOCAL = "/data/local-files/?d=scenes/one.png"


def predict(
    client: TestClient,
    tasks: list[dict[str, Any]],
    label_config: str,
    headers: dict[str, str] | None = None,
) -> Any:
    """A request shaped like Label Studio's own ``MLApi.make_predictions``."""
    body = {
        "tasks": tasks,
        "project": "3.1732000000",
        "label_config": label_config,
        "params": {"login": None, "password": None, "context": None},
    }
    return client.post("/labelstudio/predict", json=body, headers=headers)


def explained(client: TestClient) -> dict[str, Any]:
    """What ``/v1/explain`` says of the same image, with the backend's threshold."""
    response = post_image(
        client,
        "/v1/explain",
        IMAGE,
        params={
            "model": "tiny",
            "top_k": "10",
            "include": "boxes,polygons,masks",
            "threshold": THRESHOLD,
            "regions": "all",
        },
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_health_is_up_once_models_are_ready(client: TestClient) -> None:
    for path in ("/labelstudio/health", "/labelstudio/"):
        response = client.get(path)
        assert response.status_code == 200
        assert response.json()["status"] == "UP"
        assert set(response.json()["models"]) == {"mini", "tiny"}


def test_setup_answers_the_model_version(client: TestClient) -> None:
    response = client.post(
        "/labelstudio/setup",
        json={"project": "3.1732000000", "schema": config(), "hostname": "http://ls:8080"},
    )
    assert response.status_code == 200
    version = response.json()["model_version"]
    assert version.split(":")[1:] == ["tiny", "gradcam", "layer4"]


def test_the_manual_states_the_model_version_make_serve_answers() -> None:
    """docs/labelstudio.md gives the model version of ``make serve``'s default model (issue #52:
    it still named the demo model's Grad-CAM of an earlier version)."""
    manual = (ROOT / "docs" / "labelstudio.md").read_text()
    stated = set(re.findall(r"camserve-\d[^\s`\"]*", manual))
    settings = make_settings(SHIPPED_MODELS, models=["efficientnet_lite0"])
    with serving(settings) as client:
        answered = client.post("/labelstudio/setup", json={}).json()["model_version"]
    assert stated == {answered}
    assert answered == f"camserve-{__version__}:efficientnet_lite0:layercam:fused"


def test_versions_list_the_setup_model_version(client: TestClient) -> None:
    version = client.post("/labelstudio/setup", json={"project": "3.1"}).json()["model_version"]
    response = client.get("/labelstudio/versions", params={"project": "3.1"})
    assert response.status_code == 200
    assert response.json() == {"versions": [version]}


@pytest.fixture(scope="module")
def layercam_models(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tiny`` again, its manifest naming LayerCAM as its default method."""
    folder = tmp_path_factory.mktemp("layercam-default")
    manifest = (models_dir / "tiny.toml").read_text()
    (folder / "tiny.toml").write_text(manifest + 'method = "layercam"\n')
    return folder


@pytest.mark.parametrize(
    ("setting", "method"), [({}, "layercam"), ({"labelstudio_method": "gradcam++"}, "gradcam++")]
)
def test_predictions_use_the_models_default_method_unless_one_is_set(
    layercam_models: Path, image_root: Path, setting: dict[str, str], method: str
) -> None:
    """Issue #52: the backend used Grad-CAM whatever the model's default, so annotators got
    other regions than the page showed them. Unset, the model's default method and layer."""
    settings = make_settings(
        layercam_models, local_files_document_root=image_root, labelstudio_threshold=THRESHOLD
    )
    with serving(settings.model_copy(update=setting)) as client:
        version = client.post("/labelstudio/setup", json={}).json()["model_version"]
        response = predict(client, [task(LOCAL)], config())
        page = {"include": "boxes", "threshold": THRESHOLD, "regions": "largest"}
        answer = post_image(
            client, "/v1/explain", IMAGE, params=page | ({"method": method} if setting else {})
        ).json()
    assert version.split(":")[1:] == ["tiny", method, "layer4"]
    assert response.status_code == 200, response.text
    (box,) = [r for r in response.json()["results"][0]["result"] if r["type"] == "rectanglelabels"]
    x0, y0 = box["value"]["x"] * WIDTH / 100, box["value"]["y"] * HEIGHT / 100
    (expected, *_) = answer["explanations"][0]["boxes"]
    assert answer["explanations"][0]["method"] == method
    assert_within([x0, y0], [expected["x0"], expected["y0"]], atol=1e-9)


def test_predict_fills_every_control_from_the_cam(client: TestClient) -> None:
    response = predict(client, [task(LOCAL)], config())
    assert response.status_code == 200, response.text
    body = response.json()
    (prediction,) = body["results"]
    assert prediction["model_version"] == body["model_version"]
    assert LabelInterface(config()).validate_prediction(copy.deepcopy(prediction))

    reference = explained(client)
    top = reference["explanations"][0]
    assert prediction["score"] == pytest.approx(top["probability"])
    by_control: dict[str, list[dict[str, Any]]] = {}
    for result in prediction["result"]:
        by_control.setdefault(result["from_name"], []).append(result)
    assert [r["value"]["choices"] for r in by_control["kind"]] == [[top["label"]]]

    boxes = [
        (
            r["value"]["x"] * WIDTH / 100,
            r["value"]["y"] * HEIGHT / 100,
            (r["value"]["x"] + r["value"]["width"]) * WIDTH / 100,
            (r["value"]["y"] + r["value"]["height"]) * HEIGHT / 100,
        )
        for r in by_control["box"]
    ]
    expected = [(b["x0"], b["y0"], b["x1"], b["y1"]) for b in top["boxes"]]
    assert_within(boxes, expected, atol=1e-9)
    for result in by_control["box"] + by_control["outline"] + by_control["mask"]:
        assert (result["original_width"], result["original_height"]) == (WIDTH, HEIGHT)
        assert result["to_name"] == "photo"
        assert result["value"][result["type"]] == [top["label"]]

    polygons = [
        [(x * WIDTH / 100, y * HEIGHT / 100) for x, y in r["value"]["points"]]
        for r in by_control["outline"]
    ]
    assert [np.round(p).astype(int).tolist() for p in polygons] == top["polygons"]

    union = np.zeros((HEIGHT, WIDTH), dtype=bool)
    for result in by_control["mask"]:
        rgba = decode_rle(result["value"]["rle"]).reshape(HEIGHT, WIDTH, 4)
        assert set(np.unique(rgba)) <= {0, 255}
        union |= rgba[..., 3] == 255
    expected_mask = np.asarray(decode(base64.b64decode(top["mask"]))) == 255
    np.testing.assert_array_equal(union, expected_mask)


def test_predict_skips_classes_the_project_does_not_have(client: TestClient) -> None:
    ranked = [p["label"] for p in explained(client)["predictions"]]
    label_config = config(choices=[ranked[2], "not a model class"])
    prediction = predict(client, [task(LOCAL)], label_config).json()["results"][0]
    choices = [r for r in prediction["result"] if r["from_name"] == "kind"]
    assert [r["value"]["choices"] for r in choices] == [[ranked[2]]]
    assert choices[0]["score"] == pytest.approx(explained(client)["predictions"][2]["probability"])


def test_predicted_values_map_model_classes_to_project_labels(client: TestClient) -> None:
    top = explained(client)["predictions"][0]["label"]
    label_config = config(choices=["Top shape"], choices_extra=f' predicted_values="{top}"')
    prediction = predict(client, [task(LOCAL)], label_config).json()["results"][0]
    choices = [r["value"]["choices"] for r in prediction["result"] if r["from_name"] == "kind"]
    assert choices == [["Top shape"]]


def test_predict_answers_every_task_in_order(client: TestClient, image_root: Path) -> None:
    other = image_bytes(50, 40, seed=9)
    data_uri = "data:image/png;base64," + base64.b64encode(other).decode()
    label_config = config()
    response = predict(client, [task(LOCAL, 1), task(data_uri, 2)], label_config)
    assert response.status_code == 200, response.text
    first, second = response.json()["results"]
    first_box = next(r for r in first["result"] if r["type"] == "rectanglelabels")
    second_box = next(r for r in second["result"] if r["type"] == "rectanglelabels")
    assert (first_box["original_width"], first_box["original_height"]) == (WIDTH, HEIGHT)
    assert (second_box["original_width"], second_box["original_height"]) == (50, 40)


def test_more_tasks_than_the_queue_holds_are_all_answered(models_dir: Path) -> None:
    """Label Studio's "Retrieve Predictions" sends every selected task in one request."""
    settings = make_settings(models_dir, default_model="tiny", queue_size=3, max_batch_size=2)
    images = [image_bytes(40 + 4 * index, 36, seed=index) for index in range(12)]
    tasks = [
        task("data:image/png;base64," + base64.b64encode(image).decode(), index)
        for index, image in enumerate(images)
    ]
    with serving(settings) as client:
        response = predict(client, tasks, config())
    assert response.status_code == 200, response.text
    widths = [
        next(r["original_width"] for r in prediction["result"] if "original_width" in r)
        for prediction in response.json()["results"]
    ]
    assert widths == [40 + 4 * index for index in range(12)]


@pytest.mark.parametrize(
    "reference",
    [
        "/data/local-files/?d=../secret.png",
        "/data/local-files/?d=scenes/../../secret.png",
        "/data/local-files/?d=%2e%2e/secret.png",
        "/data/local-files/?d=/etc/passwd",
        "file:///etc/passwd",
    ],
)
def test_references_outside_the_root_are_refused(client: TestClient, reference: str) -> None:
    response = predict(client, [task(reference)], config())
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "image_reference_refused"
    assert worker_hook_count(client.app) == 0


@pytest.fixture
def image_host() -> Iterator[Host]:
    """An image server on 127.0.0.1, which camserve must not reach unless allowed."""
    with running(Host(elsewhere_routes())) as host:
        yield host


@pytest.mark.parametrize(
    "spelling", ["127.0.0.1", "127.1", "2130706433", "0x7f000001", "[::ffff:127.0.0.1]"]
)
def test_a_task_image_on_loopback_is_refused_unfetched(
    client: TestClient, image_host: Host, spelling: str
) -> None:
    """Issue 23: these were fetched ("not an image"), and private addresses' statuses shown."""
    url = image_host.url("/image.png").replace("127.0.0.1", spelling)
    response = predict(client, [task(url)], config())
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "image_destination_refused"
    assert error["message"].startswith(f"{url} is refused")
    assert "loopback" in error["message"]
    assert "CAMSERVE_TASK_IMAGE_ALLOW" in error["message"]
    assert image_host.seen == []
    assert worker_hook_count(client.app) == 0


def test_a_task_image_host_that_is_allowed_is_fetched(models_dir: Path, image_host: Host) -> None:
    allow = host_and_port(image_host)
    settings = make_settings(models_dir, default_model="tiny", task_image_allow=allow)
    with serving(settings) as client:
        response = predict(client, [task(image_host.url("/image.png"))], config())
    assert response.status_code == 200, response.text
    box = next(r for r in response.json()["results"][0]["result"] if "original_width" in r)
    assert (box["original_width"], box["original_height"]) == (16, 16)
    assert image_host.paths_seen() == ["/image.png"]


def test_oversize_task_image_is_refused(client: TestClient) -> None:
    response = predict(client, [task("/data/local-files/?d=big.png")], config())
    assert response.status_code == 413, response.text
    assert response.json()["error"]["code"] == "payload_too_large"


def test_task_without_the_image_key_is_a_clear_422(client: TestClient) -> None:
    response = predict(client, [{"id": 4, "data": {"photo": LOCAL}}], config())
    assert response.status_code == 422
    assert "data.picture" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("label_config", "mentions"),
    [
        ("<View><Image", "label_config"),
        ('<View><Image name="i" value="$i"/><TextArea name="t" toName="i"/></View>', "nothing"),
    ],
)
def test_unusable_label_configs_are_422(
    client: TestClient, label_config: str, mentions: str
) -> None:
    response = predict(client, [task(LOCAL)], label_config)
    assert response.status_code == 422
    assert mentions in response.json()["error"]["message"]


def test_webhook_is_acknowledged_and_training_is_not_supported(client: TestClient) -> None:
    created = client.post("/labelstudio/webhook", json={"action": "ANNOTATION_CREATED"})
    assert created.status_code == 200
    assert created.json()["action"] == "ANNOTATION_CREATED"
    for response in (
        client.post("/labelstudio/webhook", json={"action": "START_TRAINING"}),
        client.post("/labelstudio/train", json={"annotations": []}),
    ):
        assert response.status_code == 501
        assert response.json()["error"]["code"] == "training_not_supported"


def test_basic_auth_when_configured(models_dir: Path) -> None:
    settings = make_settings(
        models_dir, labelstudio_basic_auth_user="ls", labelstudio_basic_auth_pass="s3cret"
    )
    with serving(settings) as client:
        missing = client.get("/labelstudio/health")
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Basic")
        assert client.get("/labelstudio/health", auth=("ls", "wrong")).status_code == 401
        assert client.get("/labelstudio/health", auth=("other", "s3cret")).status_code == 401
        assert client.get("/labelstudio/health", auth=("ls", "s3cret")).status_code == 200


def test_api_key_is_the_basic_auth_password_when_no_user_is_set(models_dir: Path) -> None:
    with serving(make_settings(models_dir, api_key="k3y")) as client:
        assert client.get("/labelstudio/health").status_code == 401
        assert client.get("/labelstudio/health", auth=("anyone", "k3y")).status_code == 200


def test_backend_can_be_turned_off(models_dir: Path) -> None:
    with serving(make_settings(models_dir, labelstudio_enabled=False)) as client:
        assert client.get("/labelstudio/health").status_code == 404


def test_a_task_opened_again_is_answered_from_its_kept_pass(
    models_dir: Path, image_root: Path
) -> None:
    settings = make_settings(
        models_dir,
        default_model="tiny",
        local_files_document_root=image_root,
        labelstudio_threshold=THRESHOLD,
        pass_cache_mb=16,
    )
    with serving(settings) as client:
        first = predict(client, [task(LOCAL)], config())
        reuses_before = MetricsSnapshot.parse(client.get("/metrics").text)
        again = predict(client, [task(LOCAL)], config())
        reuses_after = MetricsSnapshot.parse(client.get("/metrics").text)
    assert first.status_code == again.status_code == 200
    assert without_ids(again.json()["results"]) == without_ids(first.json()["results"])
    assert reuses_before.value("camserve_pass_reuses_total") == 0
    assert reuses_after.value("camserve_pass_reuses_total") == 1


def without_ids(predictions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The predictions with each region's id (drawn anew for every answer) left out."""
    return [
        {
            **prediction,
            "result": [{k: v for k, v in r.items() if k != "id"} for r in prediction["result"]],
        }
        for prediction in predictions
    ]
