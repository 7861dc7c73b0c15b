"""Dependency aliases shared by the routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from camserve.serving.service import Service

__all__ = ["ServiceDep"]


async def _service(request: Request) -> Service:
    """An ``async`` dependency, so FastAPI runs it on the loop: a plain function would be sent
    to a worker thread for every request (a thread hop, and new threads under a burst)."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(_service)]
