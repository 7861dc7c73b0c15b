"""Decoded uploads behind the routes: the same file sent again is not decoded again, and every
answer is what a server that decodes each upload gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from camserve.engine.images import imaging
from camserve.serving import service as service_module
from tests.api.helpers import assert_same_explain_body, make_settings, post_image, serving
from tests.harness.live_server import MetricsSnapshot
from tests.support import image_bytes, photo_bytes

ONE_PER_BATCH = {"models": ["tiny"], "max_batch_size": 1, "pass_cache_mb": 16}


@pytest.fixture(scope="module")
def servers(models_dir: Path) -> Iterator[tuple[TestClient, TestClient]]:
    """A server that keeps decoded uploads, and one that decodes every upload (the reference)."""
    with (
        serving(make_settings(models_dir, upload_cache_mb=16, **ONE_PER_BATCH)) as keeping,
        serving(make_settings(models_dir, upload_cache_mb=0, **ONE_PER_BATCH)) as plain,
    ):
        yield keeping, plain


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the uploads the service decodes, in order."""
    seen: list[int] = []

    def counted(data: bytes, **options: Any) -> imaging.DecodedImage:
        seen.append(len(data))
        return imaging.decode_image(data, **options)

    monkeypatch.setattr(service_module, "decode_image", counted)
    return seen


def explain(client: TestClient, image: bytes, **params: Any) -> dict[str, Any]:
    query = {"model": "tiny", "include": "raw_map,heatmap,overlay", **params}
    response = post_image(client, "/v1/explain", image, content_type="image/jpeg", params=query)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def reuses(client: TestClient) -> float:
    snapshot = MetricsSnapshot.parse(client.get("/metrics").text)
    return snapshot.value("camserve_upload_reuses_total")


def test_the_same_file_is_decoded_once_and_answers_as_a_fresh_decode_would(
    servers: tuple[TestClient, TestClient], decodes: list[int]
) -> None:
    keeping, plain = servers
    photo = photo_bytes(7, 160, 120)
    before = reuses(keeping)
    asked = [{"method": "gradcam"}, {"method": "layercam", "colormap": "viridis"}, {}]
    for params in asked:
        assert_same_explain_body(explain(keeping, photo, **params), explain(plain, photo, **params))
    # the keeping server decoded the photo once, the plain one each time
    assert decodes == [len(photo)] * (1 + len(asked))
    assert reuses(keeping) - before == len(asked) - 1


def test_other_bytes_of_the_same_pixels_are_decoded_again(
    servers: tuple[TestClient, TestClient], decodes: list[int]
) -> None:
    keeping, _ = servers
    png = image_bytes(64, 48, "PNG", seed=5)
    explain(keeping, png)
    explain(keeping, png + b"\0")  # trailing bytes after the image: another file, same pixels
    assert decodes == [len(png), len(png) + 1]


def test_serving_leaves_the_kept_pixels_as_decoded(
    servers: tuple[TestClient, TestClient],
) -> None:
    keeping, _ = servers
    photo = photo_bytes(8, 96, 72)
    for method in ("gradcam", "scorecam", "eigencam"):
        explain(keeping, photo, method=method, alpha=0.2)
    service = keeping.app.state.service  # type: ignore[attr-defined]
    kept = service.uploads.find(service.uploads.key(photo))
    assert kept is not None
    assert torch.equal(kept.image.pixels, imaging.decode_image(photo).pixels)
