"""``explain`` and ``cam`` with ``on_progress``: the call runs as a job on a real camserve,
the callback hears its progress rise to 1, and the result is the one of the plain call."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

from camserve_client import AsyncClient, Client
from tests.client.conftest import shapes_models
from tests.integration.live import LiveServer, live_server
from tests.support import SAMPLE_PHOTOS, image_bytes

STAR = SAMPLE_PHOTOS.parent / "shapes" / "star.jpg"
SCORE_CAM = {"methods": ["scorecam"], "layer": "layer3"}
POLL_S = 0.01


@pytest.fixture(scope="module")
def client(shapes_server: LiveServer) -> Iterator[Client]:
    with Client(shapes_server.base_url, poll_s=POLL_S) as client:
        yield client


@pytest.fixture(scope="module")
def stepwise_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The shapes model with one masked input per Score-CAM chunk: its progress moves in as
    many steps as the layer has channels, so that a poll always lands between two of them
    (with the default chunks a fast machine runs the whole job in one or two)."""
    models = shapes_models(tmp_path_factory.mktemp("models"))
    settings = {"score_cam_batch_size": 1}
    with live_server(models, tmp_path_factory.mktemp("server"), settings) as server:
        yield server


def test_explain_follows_a_score_cam_job_and_answers_as_the_plain_call(
    stepwise_server: LiveServer,
) -> None:
    """The followed call comes first: the server's caches would answer a repeated one at
    once, from 0 to 1 with nothing between."""
    image = image_bytes(96, 96, seed=4242)
    heard: list[float] = []
    with Client(stepwise_server.base_url, poll_s=POLL_S) as client:
        followed = client.explain(image, on_progress=heard.append, **SCORE_CAM)
        plain = client.explain(image, **SCORE_CAM)
    assert heard == sorted(heard)
    assert heard[-1] == 1.0
    assert any(0 < fraction < 1 for fraction in heard), heard
    assert [p.label for p in followed.predictions] == [p.label for p in plain.predictions]
    ours, theirs = followed.explanation("scorecam"), plain.explanation("scorecam")
    assert np.array_equal(ours.heatmap, theirs.heatmap)


def test_cam_follows_its_job_too(client: Client) -> None:
    plain = client.cam(STAR, method="scorecam", layer="layer3")
    heard: list[float] = []
    followed = client.cam(STAR, method="scorecam", layer="layer3", on_progress=heard.append)
    assert heard[-1] == 1.0
    assert (followed.label, followed.method, followed.layer) == ("star", "scorecam", "layer3")
    assert np.array_equal(np.asarray(followed.overlay), np.asarray(plain.overlay))
    assert followed.label == plain.label


def test_the_async_client_follows_a_job(shapes_server: LiveServer) -> None:
    async def followed() -> tuple[list[float], str]:
        heard: list[float] = []
        async with AsyncClient(shapes_server.base_url, poll_s=POLL_S) as client:
            result = await client.explain(STAR, on_progress=heard.append, **SCORE_CAM)
        return heard, result.predictions[0].label

    heard, label = asyncio.run(followed())
    assert heard[-1] == 1.0
    assert label == "star"


class Recording(httpx.HTTPTransport):
    """Sends as usual, and keeps each request's method and path with its answer's status."""

    def __init__(self) -> None:
        super().__init__()
        self.exchanges: list[tuple[str, str, int]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.exchanges.append((request.method, request.url.path, response.status_code))
        return response


def test_a_callback_that_raises_cancels_the_job(shapes_server: LiveServer) -> None:
    class EnoughError(Exception):
        pass

    def stop_at_once(_fraction: float) -> None:
        raise EnoughError

    recording = Recording()
    with Client(shapes_server.base_url, transport=recording, poll_s=POLL_S) as client:
        with pytest.raises(EnoughError):
            client.explain(STAR, on_progress=stop_at_once, **SCORE_CAM)
        (posted, cancelled) = recording.exchanges
        assert posted[:1] + posted[2:] == ("POST", 202)
        assert cancelled[0] == "DELETE"
        assert cancelled[1].startswith("/v1/jobs/")
        assert cancelled[2] == 204
        assert client._http.get(cancelled[1]).status_code == 404
