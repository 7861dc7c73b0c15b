"""Optional credentials, compared in constant time: one of the API keys as ``Authorization:
Bearer <key>`` for the API, the admin key the same way for the model repository routes, basic
auth for the Label Studio backend; and who a request comes from (``sender_of``)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets

from fastapi import Request
from pydantic import SecretStr
from starlette.datastructures import Headers

from camserve.serving.callers import KeyRing
from camserve.serving.errors import BasicAuthError, UnauthorizedError

__all__ = [
    "api_key_refusal",
    "caller_of",
    "key_ring_refusal",
    "owner_of",
    "require_admin_key",
    "require_api_key",
    "require_basic_auth",
    "sender_of",
]


async def require_api_key(request: Request) -> None:
    """Refuse the request with 401 unless it carries one of the API keys (no-op without keys)."""
    refusal = key_ring_refusal(request.headers, KeyRing.of(request.app.state.settings))
    if refusal is not None:
        raise refusal


def caller_of(headers: Headers, keys: KeyRing) -> str:
    """Who asks: the sha256 of the bearer key in ``headers`` when the service has API keys,
    else ``""``; what the caches keep for one caller never answers another."""
    if not keys:
        return ""
    return hashlib.sha256(_bearer(headers).encode()).hexdigest()


def sender_of(headers: Headers, client: tuple[str, int] | None, keys: KeyRing) -> str:
    """Who the queue's fair shares, the logs and the metrics count a request against: the name
    of the API key it presents (a bearer key, or the Label Studio backend's basic-auth
    password), else the client's address (``client`` from the ASGI scope; empty when
    unknown)."""
    if keys:
        name = keys.name_of(_presented_key(headers))
        if name is not None:
            return name
    return "" if client is None else client[0]


def _bearer(headers: Headers) -> str:
    return headers.get("authorization", "").partition(" ")[2].strip()


def _presented_key(headers: Headers) -> str:
    """The bearer key, or the password of basic auth (how Label Studio sends the key)."""
    header = headers.get("authorization", "")
    if header.partition(" ")[0].lower() == "basic":
        return _basic_credentials(header)[1]
    return _bearer(headers)


def owner_of(headers: Headers, client: tuple[str, int] | None, keys: KeyRing) -> str:
    """Whose an asynchronous job is: the sha256 of the bearer key (``caller_of``) when the
    service has API keys, else the client's address (empty when unknown)."""
    if keys:
        return "key " + caller_of(headers, keys)
    return "address " + ("" if client is None else client[0])


async def require_admin_key(request: Request) -> None:
    """Refuse the request with 401 unless it carries the admin key (the routes that need it are
    served only when one is set)."""
    refusal = api_key_refusal(request.headers, request.app.state.settings.admin_key, "admin key")
    if refusal is not None:
        raise refusal


def key_ring_refusal(headers: Headers, keys: KeyRing) -> UnauthorizedError | None:
    """Why ``headers`` carry none of ``keys`` as a bearer key, or ``None`` when they carry one
    (or when there are no keys)."""
    if not keys:
        return None
    scheme, _, given = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return UnauthorizedError("missing API key: send 'Authorization: Bearer <key>'")
    if keys.name_of(given.strip()) is None:
        return UnauthorizedError("wrong API key")
    return None


def api_key_refusal(
    headers: Headers, expected: SecretStr | None, what: str = "API key"
) -> UnauthorizedError | None:
    """Why ``headers`` do not carry the ``expected`` key (``what`` names it), or ``None`` when
    they do (or when no key is set)."""
    if expected is None:
        return None
    scheme, _, given = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return UnauthorizedError(f"missing {what}: send 'Authorization: Bearer <key>'")
    if not secrets.compare_digest(given.strip().encode(), expected.get_secret_value().encode()):
        return UnauthorizedError(f"wrong {what}")
    return None


async def require_basic_auth(request: Request) -> None:
    """Label Studio's connect dialog offers basic auth only: with ``labelstudio_basic_auth_*``
    set, require them; otherwise, with API keys set, require one of them as the password (any
    user)."""
    settings = request.app.state.settings
    user, password = _basic_credentials(request.headers.get("authorization", ""))
    if settings.labelstudio_basic_auth_pass is not None:
        expected_user = settings.labelstudio_basic_auth_user or ""
        user_ok = secrets.compare_digest(user.encode(), expected_user.encode())
        expected = settings.labelstudio_basic_auth_pass.get_secret_value()
        accepted = secrets.compare_digest(password.encode(), expected.encode()) and user_ok
    elif keys := KeyRing.of(settings):
        accepted = keys.name_of(password) is not None
    else:
        return
    if not accepted:
        raise BasicAuthError("missing or wrong basic-auth credentials for the Label Studio backend")


def _basic_credentials(header: str) -> tuple[str, str]:
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or not encoded:
        return "", ""
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return "", ""
    user, _, password = decoded.partition(":")
    return user, password
