"""``AsyncClient``: camserve over HTTP from asyncio code (notebooks, async pipelines)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
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
from camserve_client.sync_client import DEFAULT_CONCURRENCY

__all__ = ["AsyncClient"]


class AsyncClient:
    """``Client``'s calls as coroutines, on one ``httpx.AsyncClient``; close it with
    ``await client.aclose()``, or use it in ``async with``."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(
            transport=transport, **client_settings(url, api_key, timeout_s)
        )
        self._sleep = sleep
        self.poll_s = poll_s

    async def explain(
        self,
        image: ImageInput,
        *,
        on_progress: OnProgress | None = None,
        **options: Unpack[ExplainOptions],
    ) -> ExplainResult:
        """``POST /v1/explain``: predictions and, per method, layer and class, the maps.
        With ``on_progress``, the call runs as a job that it follows (``jobs.py``)."""
        call = Call("POST", "/v1/explain", explain_params(options), upload_of(image))
        return explain_result((await self._answer(call, on_progress)).json())

    async def cam(
        self,
        image: ImageInput,
        *,
        on_progress: OnProgress | None = None,
        **options: Unpack[CamOptions],
    ) -> CamResult:
        """``POST /v1/cam``: the overlay alone, with the class it explains (``on_progress``:
        as in ``explain``)."""
        call = Call("POST", "/v1/cam", cam_params(options), upload_of(image))
        response = await self._answer(call, on_progress)
        return cam_result(response.content, response.headers)

    async def models(self) -> ModelList:
        """``GET /v1/models``: the served models, and those that failed to load."""
        return model_list((await self._send(Call("GET", "/v1/models"))).json())

    async def explain_many(
        self,
        images: Sequence[ImageInput],
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        progress: bool = True,
        **options: Unpack[ExplainOptions],
    ) -> list[ExplainResult | CamserveError]:
        """``explain`` for every image, ``concurrency`` at a time, with a progress bar on
        stderr (``progress=False``: none); each image's result or its error, in order."""
        slots = asyncio.Semaphore(max(1, concurrency))

        async def outcome(
            image: ImageInput, advance: Callable[[], None]
        ) -> ExplainResult | CamserveError:
            async with slots:
                result: ExplainResult | CamserveError
                try:
                    result = await self.explain(image, **options)
                except CamserveError as error:
                    result = error
                advance()
                return result

        with progress_bar(len(images), enabled=progress, description="explaining") as advance:
            return list(await asyncio.gather(*(outcome(image, advance) for image in images)))

    async def _answer(self, call: Call, on_progress: OnProgress | None) -> httpx.Response:
        """``Client._answer``, awaited (a cancelled task cancels its job)."""
        if on_progress is None:
            return await self._send(call)
        response = await self._send(replace(call, headers=ASYNC_HEADERS))
        teller = ProgressTeller(on_progress)
        location = job_location(response)
        try:
            while location is not None and response.status_code == 202:
                teller.pending(response)
                await self._sleep(self.poll_s)
                response = await self._send(Call("GET", location))
        except BaseException:
            if location is not None:
                await asyncio.shield(self._forget(location))
            raise
        teller.finished()
        return response

    async def _forget(self, location: str) -> None:
        with contextlib.suppress(httpx.HTTPError):
            await self._http.delete(location)

    async def _send(self, call: Call) -> httpx.Response:
        """The successful answer to ``call``, retried as the policy says; else the error."""
        state = RetryState(self.retry)
        while True:
            try:
                response = await self._http.request(**call.request_arguments())
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
            await self._sleep(wait)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
