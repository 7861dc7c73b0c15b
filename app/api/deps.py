"""Dependency aliases shared by the routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.serving.service import Service

__all__ = ["ServiceDep"]


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(_service)]
