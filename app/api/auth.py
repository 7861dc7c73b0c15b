"""Optional API key: ``Authorization: Bearer <key>``, compared in constant time."""

from __future__ import annotations

import secrets

from fastapi import Request

from app.engine.errors import UnauthorizedError

__all__ = ["require_api_key"]


async def require_api_key(request: Request) -> None:
    """Refuse the request with 401 unless the key matches (no-op when no key is set)."""
    expected = request.app.state.settings.api_key
    if expected is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        raise UnauthorizedError("missing API key: send 'Authorization: Bearer <key>'")
    if not secrets.compare_digest(given.strip().encode(), expected.get_secret_value().encode()):
        raise UnauthorizedError("wrong API key")
