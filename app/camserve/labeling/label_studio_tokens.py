"""Label Studio's API key as the ``Authorization`` header its kind calls for: a legacy token
as ``Token <key>``, an access token as ``Bearer``, and a personal access token (a JWT refresh
token) exchanged at ``/api/token/refresh/`` for short-lived access tokens, cached until just
before they expire."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import time
from typing import Literal

import httpx

from camserve.labeling.bounded_reads import read_limited
from camserve.labeling.task_image_errors import ImageFetchFailedError

__all__ = ["LabelStudioCredentials", "jwt_claims", "token_kind"]

TOKEN_REFRESH_PATH = "/api/token/refresh/"
TOKEN_RESPONSE_LIMIT = 64 * 1024
ACCESS_TOKEN_MARGIN_S = 30.0
"""An access token this close to its expiry is refreshed before use."""


class LabelStudioCredentials:
    """Label Studio's API key, as the ``Authorization`` header its kind of token calls for."""

    def __init__(self, api_key: str, label_studio: httpx.URL, client: httpx.AsyncClient) -> None:
        self._api_key = api_key
        self._refresh_url = label_studio.join(TOKEN_REFRESH_PATH.lstrip("/"))
        self._client = client
        self._kind = token_kind(api_key)
        self._access_token: str | None = None
        self._access_expires_at = 0.0
        self._lock = asyncio.Lock()

    async def authorization(self) -> str:
        if self._kind == "legacy":
            return f"Token {self._api_key}"
        if self._kind == "access":
            return f"Bearer {self._api_key}"
        async with self._lock:
            if self._access_token is None or time.time() >= self._access_expires_at:
                await self._refresh()
            return f"Bearer {self._access_token}"

    def forget_access_token(self) -> None:
        """Drop the cached access token, so that the next request exchanges the key again."""
        self._access_token = None

    async def _refresh(self) -> None:
        """Exchange the personal access token for an access token."""
        request = self._client.build_request(
            "POST", self._refresh_url, json={"refresh": self._api_key}
        )
        response = await self._client.send(request, stream=True)
        try:
            if response.status_code != 200:
                raise ImageFetchFailedError(
                    "Label Studio refused to exchange camserve's personal access token "
                    f"(HTTP {response.status_code}); it may have expired or been revoked",
                    response.status_code,
                )
            body = await read_limited(response, TOKEN_RESPONSE_LIMIT)
        finally:
            await response.aclose()
        access = access_token_from(body)
        claims = jwt_claims(access) or {}
        expiry = claims.get("exp")
        lifetime_end = float(expiry) if isinstance(expiry, int | float) else float("inf")
        self._access_token = access
        self._access_expires_at = lifetime_end - ACCESS_TOKEN_MARGIN_S


def token_kind(api_key: str) -> Literal["legacy", "access", "refresh"]:
    claims = jwt_claims(api_key)
    if claims is None:
        return "legacy"
    return "refresh" if claims.get("token_type") == "refresh" else "access"


def jwt_claims(token: str) -> dict[str, object] | None:
    """The claims of a well-formed JWT (signature unchecked), or None for any other string."""
    segments = token.split(".")
    if len(segments) != 3:
        return None
    try:
        header, claims = (
            json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
            for part in segments[:2]
        )
    except (ValueError, binascii.Error):
        return None
    if not isinstance(header, dict) or "alg" not in header or not isinstance(claims, dict):
        return None
    return claims


def access_token_from(body: bytes) -> str:
    try:
        access = json.loads(body).get("access")
    except (ValueError, AttributeError):
        access = None
    if not isinstance(access, str) or not access:
        raise ImageFetchFailedError("Label Studio's token refresh answer has no access token")
    return access
