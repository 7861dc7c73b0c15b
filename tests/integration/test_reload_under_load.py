"""Reloads under load on a live server: eight client threads ask for explanations without a
pause (each in turn Grad-CAM, Grad-CAM++, LayerCAM and Eigen-CAM of one image) while the model
is reloaded five times, through the repository API (Triton's own client, with the answer cache
and the kept passes on, so most answers come from them) and by rewriting its manifest in a
polled folder (caches off). No request fails; each answer names a version
that served while it was asked; between two reloads every answer comes from the last version
loaded, so the versions seen are exactly the ones loaded, in order. A broken manifest dropped
into the polled folder leaves the last version serving, reported in the index and /v1/models.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import tritonclient.http as triton_http

from tests.harness.live_server import MetricsSnapshot
from tests.integration.live import LiveServer, live_server, poll_until
from tests.model_folders import reloadable_model, write_manifest
from tests.support import image_bytes

pytestmark = pytest.mark.slow

CLIENTS = 8
RELOADS = 5
WINDOW_ANSWERS = CLIENTS
"""Requests asked after a version began serving and answered before the next reload: each
version serves until this many have been (what the server answers, not a period of time)."""
LOAD_LIMIT_S = 30.0
"""How long a request, a reload or a window may take before the test fails."""
CLIENTS_STOP_S = 300.0
"""The client threads stop after this whatever happens (the test takes about 10 s here)."""
ADMIN_KEY = "admin-secret"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
IMAGE = image_bytes(64, 48, seed=3)
METHODS = ("gradcam", "gradcam++", "layercam", "eigencam")


@dataclass(frozen=True)
class Answer:
    started: float
    ended: float
    status: int
    version: str
    error: str = ""


@dataclass(frozen=True)
class Swap:
    """A version made current: after ``asked`` and before ``served`` (monotonic seconds)."""

    version: str
    asked: float
    served: float


class Load:
    """``CLIENTS`` threads, each asking ``/v1/explain`` for one image at a time until stopped."""

    def __init__(self, server: LiveServer) -> None:
        self._server = server
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.answers: list[Answer] = []
        self._threads = [
            threading.Thread(target=self._ask, args=(index,)) for index in range(CLIENTS)
        ]

    def _ask(self, thread: int) -> None:
        deadline = time.monotonic() + CLIENTS_STOP_S
        with httpx.Client(timeout=LOAD_LIMIT_S) as client:
            for turn in itertools.count(thread):
                if self._stop.is_set() or time.monotonic() >= deadline:
                    return
                self._record(self._one(client, METHODS[turn % len(METHODS)]))

    def _one(self, client: httpx.Client, method: str) -> Answer:
        started = time.monotonic()
        try:
            response = client.post(
                self._server.url("/v1/explain"),
                params={"model": "m", "method": method, "include": ""},
                content=IMAGE,
                headers={"Content-Type": "image/png"},
            )
        except httpx.HTTPError as error:
            return Answer(started, time.monotonic(), 0, "", repr(error))
        ended = time.monotonic()
        if response.status_code != 200:
            return Answer(started, ended, response.status_code, "", response.text)
        version = response.json()["model_version"]
        assert response.headers["X-Camserve-Model-Version"] == version
        return Answer(started, ended, 200, version)

    def _record(self, answer: Answer) -> None:
        with self._lock:
            self.answers.append(answer)

    def count(self) -> int:
        with self._lock:
            return len(self.answers)

    def answered_since(self, moment: float) -> int:
        """Requests asked after ``moment`` (monotonic seconds) that have been answered."""
        with self._lock:
            return sum(1 for answer in self.answers if answer.started > moment)

    def window(self, moment: float) -> None:
        """Wait until ``WINDOW_ANSWERS`` requests asked after ``moment`` have been answered."""
        poll_until(
            lambda: self.answered_since(moment) >= WINDOW_ANSWERS,
            timeout=LOAD_LIMIT_S,
            what=f"{WINDOW_ANSWERS} answers to requests asked since the last change",
        )

    @contextmanager
    def running(self) -> Iterator[Load]:
        for thread in self._threads:
            thread.start()
        try:
            poll_until(lambda: self.count() >= CLIENTS, what="the first answers")
            yield self
        finally:
            self._stop.set()
            for thread in self._threads:
                thread.join(LOAD_LIMIT_S)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """``m``, the demo architecture on checkpoint ``a.pt``; ``b.pt`` beside it."""
    models = tmp_path / "models"
    models.mkdir()
    return reloadable_model(models)


def listed_model(server: LiveServer) -> dict[str, Any]:
    (model,) = httpx.get(server.url("/v1/models"), timeout=10).json()["models"]
    return dict(model)


def reload_under_load(
    server: LiveServer, folder: Path, reload: Callable[[str], str]
) -> tuple[list[Answer], list[Swap]]:
    """Five reloads (``reload(weights)`` returns the new version once it serves), alternating
    between the two checkpoints, each version serving under load until ``WINDOW_ANSWERS``
    requests asked after it began have been answered."""
    swaps = [Swap(listed_model(server)["model_version"], -math.inf, time.monotonic())]
    with Load(server).running() as load:
        for index in range(RELOADS):
            load.window(swaps[-1].served)
            asked = time.monotonic()
            write_manifest(folder, "m", "b.pt" if index % 2 == 0 else "a.pt")
            version = reload("m")
            swaps.append(Swap(version, asked, time.monotonic()))
        load.window(swaps[-1].served)
    return load.answers, swaps


def versions_per_window(answers: list[Answer], swaps: list[Swap]) -> list[str]:
    """Check every answer against the versions that served while it was asked, and return the
    version of the answers between each two reloads (there must be some, all of one version)."""
    ends = [swap.served for swap in swaps[1:]] + [math.inf]
    for answer in answers:
        serving = {
            swap.version
            for swap, end in zip(swaps, ends, strict=True)
            if swap.asked <= answer.ended and answer.started <= end
        }
        assert answer.version in serving, (answer, swaps)
    seen = []
    starts = [swap.asked for swap in swaps[1:]] + [math.inf]
    for swap, next_asked in zip(swaps, starts, strict=True):
        inside = {a.version for a in answers if a.started > swap.served and a.ended < next_asked}
        assert inside == {swap.version}, (swap, inside)
        seen.append(swap.version)
    return seen


def assert_reloads_dropped_nothing(
    answers: list[Answer], swaps: list[Swap], server: LiveServer
) -> None:
    failures = [answer for answer in answers if answer.status != 200]
    assert failures == []
    first, second = swaps[0].version, swaps[1].version
    assert first != second
    assert [swap.version for swap in swaps] == [first, second] * 3
    assert versions_per_window(answers, swaps) == [first, second] * 3
    during = sum(1 for a in answers for s in swaps[1:] if s.asked < a.ended < s.served)
    counts = MetricsSnapshot.parse(httpx.get(server.url("/metrics"), timeout=10).text)
    hits = counts.value("camserve_cache_hits_total")
    reused = counts.value("camserve_pass_reuses_total")
    print(
        f"\n{len(answers)} requests from {CLIENTS} threads, {len(failures)} failed, "
        f"{during} answered while a new version loaded, {hits:.0f} from the answer cache, "
        f"{reused:.0f} from kept passes; versions loaded {[swap.version for swap in swaps]}, "
        f"seen per window {versions_per_window(answers, swaps)}"
    )


def test_explicit_reloads_through_tritons_client_fail_no_request(
    folder: Path, tmp_path: Path
) -> None:
    settings = {
        "model_control": "explicit",
        "admin_key": ADMIN_KEY,
        "max_wait_ms": 2,
        "cache_mb": 16,
        "pass_cache_mb": 16,
    }
    with live_server(folder, tmp_path, settings) as server:
        triton = triton_http.InferenceServerClient(url=server.base_url.removeprefix("http://"))

        def reload(name: str) -> str:
            triton.load_model(name, headers=ADMIN)
            (entry,) = triton.get_model_repository_index(headers=ADMIN)
            assert entry["state"] == "READY"
            return str(entry["version"])

        try:
            answers, swaps = reload_under_load(server, folder, reload)
            assert_reloads_dropped_nothing(answers, swaps, server)
            counts = MetricsSnapshot.parse(httpx.get(server.url("/metrics"), timeout=10).text)
            assert counts.value("camserve_cache_hits_total") > 0
            assert counts.value("camserve_pass_reuses_total") > 0
        finally:
            triton.close()


def test_poll_reloads_fail_no_request_and_a_broken_manifest_keeps_the_version(
    folder: Path, tmp_path: Path
) -> None:
    settings = {
        "model_control": "poll",
        "poll_interval_s": 0.2,
        "admin_key": ADMIN_KEY,
        "max_wait_ms": 2,
    }
    with live_server(folder, tmp_path, settings) as server:

        def reload(_name: str) -> str:
            before = listed_model(server)["model_version"]
            poll_until(
                lambda: listed_model(server)["model_version"] != before,
                timeout=LOAD_LIMIT_S,
                what="the rewritten manifest served",
            )
            return str(listed_model(server)["model_version"])

        answers, swaps = reload_under_load(server, folder, reload)
        assert_reloads_dropped_nothing(answers, swaps, server)
        last = swaps[-1].version
        with Load(server).running() as load:
            write_manifest(folder, "m", "missing.pt")
            poll_until(
                lambda: listed_model(server)["load_error"] is not None,
                timeout=LOAD_LIMIT_S,
                what="the failed load reported",
            )
            load.window(time.monotonic())
        assert "missing.pt" in listed_model(server)["load_error"]
        index = httpx.post(server.url("/v2/repository/index"), headers=ADMIN, timeout=10)
        (entry,) = index.json()
        assert (entry["name"], entry["version"], entry["state"]) == ("m", last, "READY")
        assert "missing.pt" in entry["reason"]
        assert [a for a in load.answers if a.status != 200] == []
        assert {a.version for a in load.answers} == {last}
        assert "failed to load" in server.log(tail=None)
