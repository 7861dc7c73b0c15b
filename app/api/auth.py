"""Optional credentials, compared in constant time: the API key as ``Authorization: Bearer
<key>`` for the API, the admin key the same way for the model repository routes, basic auth for
the Label Studio backend."""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets

from fastapi import Request
from pydantic import SecretStr
from starlette.datastructures import Headers

from app.serving.errors import BasicAuthError, UnauthorizedError

__all__ = [
    "api_key_refusal",
    "caller_of",
    "owner_of",
    "require_admin_key",
    "require_api_key",
    "require_basic_auth",
    "sender_of",
]


async def require_api_key(request: Request) -> None:
    """Refuse the request with 401 unless the key matches (no-op when no key is set)."""
    refusal = api_key_refusal(request.headers, request.app.state.settings.api_key)
    if refusal is not None:
        raise refusal


def caller_of(headers: Headers, api_key: SecretStr | None) -> str:
    """Who asks: the sha256 of the bearer key in ``headers`` when the service has an
    ``api_key``, else ``""``; what the caches keep for one caller never answers another."""
    if api_key is None:
        return ""
    given = headers.get("authorization", "").partition(" ")[2].strip()
    return hashlib.sha256(given.encode()).hexdigest()


def sender_of(headers: Headers, client: tuple[str, int] | None, api_key: SecretStr | None) -> str:
    """Who the queue's fair shares count a request against: its key (``key`` and the start of
    its sha256, never the key itself) when the service has an ``api_key``, else the client's
    address (``client`` from the ASGI scope; empty when unknown)."""
    if api_key is not None:
        given = headers.get("authorization", "").partition(" ")[2].strip()
        return "key " + hashlib.sha256(given.encode()).hexdigest()[:8]
    return "" if client is None else client[0]


def owner_of(headers: Headers, client: tuple[str, int] | None, api_key: SecretStr | None) -> str:
    """Whose an asynchronous job is: the sha256 of the bearer key (``caller_of``) when the
    service has an ``api_key``, else the client's address (empty when unknown)."""
    if api_key is not None:
        return "key " + caller_of(headers, api_key)
    return "address " + ("" if client is None else client[0])


async def require_admin_key(request: Request) -> None:
    """Refuse the request with 401 unless it carries the admin key (the routes that need it are
    served only when one is set)."""
    refusal = api_key_refusal(request.headers, request.app.state.settings.admin_key, "admin key")
    if refusal is not None:
        raise refusal


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
    set, require them; otherwise, with an API key set, require it as the password (any user)."""
    settings = request.app.state.settings
    if settings.labelstudio_basic_auth_pass is not None:
        expected = (settings.labelstudio_basic_auth_user, settings.labelstudio_basic_auth_pass)
    elif settings.api_key is not None:
        expected = (None, settings.api_key)
    else:
        return
    user, password = _basic_credentials(request.headers.get("authorization", ""))
    user_ok = expected[0] is None or secrets.compare_digest(user.encode(), expected[0].encode())
    password_ok = secrets.compare_digest(password.encode(), expected[1].get_secret_value().encode())
    if not (user_ok and password_ok):
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
