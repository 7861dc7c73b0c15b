"""One request's way through the answer cache (``app/camserve/serving/answer_cache.py``).

The route holds its queue slot and reads the image first (a full queue still answers 429 before
any byte is read); the image's bytes, the model's version, the parsed query and the caller's key
then name the answer. A hit ends the request there with the stored bytes and headers; a miss
computes as usual and the finished answer is stored. Errors never reach the cache.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass

from fastapi import Request, Response
from pydantic import BaseModel

from camserve.api.auth import caller_of
from camserve.serving.answer_cache import (
    AnswerCache,
    AnswerKey,
    CachedAnswer,
    answer_key,
    image_digest,
)
from camserve.serving.callers import KeyRing
from camserve.serving.served_models import ServedModel
from camserve.serving.service import Service

__all__ = ["CACHE_HEADER", "AnswerFound", "AnswerLookup"]

CACHE_HEADER = "X-Camserve-Cache"
TRANSPORT_HEADERS = frozenset({"content-length", "content-type", "server-timing"})
"""Written again by every response (from its body and media type), or true of the response that
computed it only (its queue wait and worker time), so not stored."""


class AnswerFound(Exception):  # noqa: N818 (a result carried out of the slot, not an error)
    """The cache held the answer: the route sends ``response`` and computes nothing."""

    def __init__(self, response: Response) -> None:
        super().__init__("answered from the cache")
        self.response = response


@dataclass
class AnswerLookup:
    """Looks a request's answer up once its image is read, and keeps it once computed."""

    service: Service
    route: str
    options: dict[str, object]
    caller: str
    """Who asks (``auth.caller_of``: a hash of their key; empty without an API key)."""
    image: str = ""
    """The sha256 of the image's bytes, once read."""

    @classmethod
    def of(cls, request: Request, service: Service, params: BaseModel) -> AnswerLookup:
        """The lookup of a request to ``request``'s route with the parsed query ``params``."""
        caller = caller_of(request.headers, KeyRing.of(service.settings))
        return cls(service, request.url.path, params.model_dump(mode="json"), caller)

    @property
    def cache(self) -> AnswerCache:
        return self.service.answers

    async def read(self, upload: Awaitable[bytes], model: ServedModel) -> bytes:
        """The image's bytes from ``upload``; raises ``AnswerFound`` when ``model``'s version
        already answered this very request."""
        data = await upload
        if not self.cache.enabled:
            return data
        self.image = await self.service.in_pool(image_digest, data)
        cached = self.cache.get(self._key(model))
        if cached is not None:
            raise AnswerFound(_replayed(cached))
        return data

    def keep(self, response: Response, model: ServedModel) -> Response:
        """Store ``response``, computed by ``model`` (the version that computed it), and mark
        it a miss; ``response`` as it is when the cache is off."""
        if not self.cache.enabled or not self.image:
            return response
        headers = tuple(
            (name, value)
            for name, value in response.headers.items()
            if name.lower() not in TRANSPORT_HEADERS
        )
        media_type = response.media_type or "application/octet-stream"
        self.cache.put(self._key(model), CachedAnswer(bytes(response.body), media_type, headers))
        response.headers[CACHE_HEADER] = "miss"
        return response

    def _key(self, model: ServedModel) -> AnswerKey:
        identity = (model.name, model.version)
        return answer_key(self.route, self.image, identity, self.options, self.caller or None)


def _replayed(answer: CachedAnswer) -> Response:
    headers = dict(answer.headers) | {CACHE_HEADER: "hit"}
    return Response(answer.body, media_type=answer.media_type, headers=headers)
