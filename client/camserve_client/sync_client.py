"""``Client``: camserve over HTTP from ordinary (blocking) Python code."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from types import TracebackType
from typing import Unpack

import httpx

from camserve_client.answers import cam_result, explain_result, model_list
from camserve_client.calls import (
    DEFAULT_TIMEOUT_S,
    RETRYABLE_TRANSPORT_ERRORS,
    Call,
    client_settings,
    connection_failed,
    error_of,
    wait_after,
)
from camserve_client.errors import CamserveError
from camserve_client.inputs import ImageInput, upload_of
from camserve_client.jobs import (
    ASYNC_HEADERS,
    DEFAULT_POLL_S,
    OnProgress,
    ProgressTeller,
    job_location,
)
from camserve_client.options import CamOptions, ExplainOptions, cam_params, explain_params
from camserve_client.progress import progress_bar
from camserve_client.results import CamResult, ExplainResult, ModelList
from camserve_client.retry import RetryPolicy, RetryState

__all__ = ["DEFAULT_CONCURRENCY", "Client"]

DEFAULT_CONCURRENCY = 4
"""Requests ``explain_many`` keeps in flight: enough to fill a server's batches."""


class Client:
    """A camserve at ``url`` (``http://host:8000``); ``api_key`` when it sets
    ``CAMSERVE_API_KEY``. Safe to share between threads; close it, or use it in ``with``."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        """``poll_s``: seconds between two looks at a followed job (``on_progress``)."""
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(transport=transport, **client_settings(url, api_key, timeout_s))
        self._sleep = sleep
        self.poll_s = poll_s

    def explain(
        self,
        image: ImageInput,
        *,
        on_progress: OnProgress | None = None,
        **options: Unpack[ExplainOptions],
    ) -> ExplainResult:
        """``POST /v1/explain``: predictions and, per method, layer and class, the maps.
        With ``on_progress``, the call runs as a job that it follows (``jobs.py``)."""
        call = Call("POST", "/v1/explain", explain_params(options), upload_of(image))
        return explain_result(self._answer(call, on_progress).json())

    def cam(
        self,
        image: ImageInput,
        *,
        on_progress: OnProgress | None = None,
        **options: Unpack[CamOptions],
    ) -> CamResult:
        """``POST /v1/cam``: the overlay alone, with the class it explains (``on_progress``:
        as in ``explain``)."""
        call = Call("POST", "/v1/cam", cam_params(options), upload_of(image))
        response = self._answer(call, on_progress)
        return cam_result(response.content, response.headers)

    def models(self) -> ModelList:
        """``GET /v1/models``: the served models, and those that failed to load."""
        return model_list(self._send(Call("GET", "/v1/models")).json())

    def explain_each(
        self,
        images: Sequence[ImageInput],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        **options: Unpack[ExplainOptions],
    ) -> Generator[ExplainResult | CamserveError, None, None]:
        """Each image's result, or its error, in the order of ``images``, with ``concurrency``
        requests in flight. Closing the generator early cancels the requests not yet sent and
        waits for those in flight."""

        def outcome(image: ImageInput) -> ExplainResult | CamserveError:
            try:
                return self.explain(image, **options)
            except CamserveError as error:
                return error

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            yield from pool.map(outcome, images)

    def explain_many(
        self,
        images: Sequence[ImageInput],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        progress: bool = True,
        **options: Unpack[ExplainOptions],
    ) -> list[ExplainResult | CamserveError]:
        """``explain`` for every image, ``concurrency`` at a time, with a progress bar on
        stderr (``progress=False``: none); each image's result or its error, in order."""
        outcomes: list[ExplainResult | CamserveError] = []
        with progress_bar(len(images), enabled=progress, description="explaining") as advance:
            for outcome in self.explain_each(images, concurrency=concurrency, **options):
                outcomes.append(outcome)
                advance()
        return outcomes

    def _answer(self, call: Call, on_progress: OnProgress | None) -> httpx.Response:
        """The final answer to ``call``: sent as it is, or, with ``on_progress``, as a job
        followed until it ends (cancelled when following it fails or is interrupted)."""
        if on_progress is None:
            return self._send(call)
        response = self._send(replace(call, headers=ASYNC_HEADERS))
        teller = ProgressTeller(on_progress)
        location = job_location(response)
        try:
            while location is not None and response.status_code == 202:
                teller.pending(response)
                self._sleep(self.poll_s)
                response = self._send(Call("GET", location))
        except BaseException:
            self._forget(location)
            raise
        teller.finished()
        return response

    def _forget(self, location: str | None) -> None:
        """Cancel the job at ``location`` (its failure or absence changes nothing)."""
        if location is not None:
            with contextlib.suppress(httpx.HTTPError):
                self._http.delete(location)

    def _send(self, call: Call) -> httpx.Response:
        """The successful answer to ``call``, retried as the policy says; else the error."""
        state = RetryState(self.retry)
        while True:
            try:
                response = self._http.request(**call.request_arguments())
            except RETRYABLE_TRANSPORT_ERRORS as failure:
                wait = state.after_connection_error()
                if wait is None:
                    raise connection_failed(failure) from failure
            except httpx.TransportError as failure:
                raise connection_failed(failure) from failure
            else:
                if response.is_success:
                    return response
                error = error_of(response)
                wait = wait_after(state, response, error)
                if wait is None:
                    raise error
            self._sleep(wait)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
