"""The model repository extension of the V2 protocol (Triton's and KServe's):
``POST /v2/repository/index``, ``POST /v2/repository/models/{name}/load`` and ``.../unload``.

Served only when ``CAMSERVE_ADMIN_KEY`` is set (``application.py``), and only to requests that
carry it as ``Authorization: Bearer <admin key>``. Errors answer in the protocol's shape,
``{"error": "<message>"}``: 400 for a load that failed, a load or unload the server's model
control does not take (``CAMSERVE_MODEL_CONTROL`` other than ``explicit``) or a malformed body,
401 without the admin key, 404 for a model without a manifest. A load answers once the new
version serves (or failed, the old one serving on); an unload once no new request reaches the
model.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import Future
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, Field

from camserve.api.auth import require_admin_key
from camserve.api.deps import ServiceDep
from camserve.api.v2_errors import InvalidInferenceRequestError, ProtocolRoute
from camserve.serving.served_models import ServedModel

__all__ = ["router"]

LOAD_PARAMETERS_TAKEN: frozenset[str] = frozenset()
UNLOAD_PARAMETERS_TAKEN = frozenset({"unload_dependents"})
"""Triton's client sends it; camserve's models have no dependents."""


class RepositoryRequestError(InvalidInferenceRequestError):
    """A body the extension cannot take: 400."""


class RepositoryRoute(ProtocolRoute):
    """The V2 routes' answers to refusals, its dependencies' included (the admin key), keeping
    only the auth challenge of camserve's own answer's headers."""

    kept_headers = ("www-authenticate",)


router = APIRouter(
    prefix="/v2/repository",
    tags=["model repository (v2)"],
    route_class=RepositoryRoute,
    dependencies=[Depends(require_admin_key)],
)


class RepositoryModel(BaseModel):
    name: str
    version: str = Field(
        description="The version that serves (READY), or the manifest's version otherwise."
    )
    state: Literal["READY", "LOADING", "UNAVAILABLE"]
    reason: str | None = Field(
        None,
        description="Why a model is unavailable, or what happened to a served one (a new "
        "version that failed to load, or is loading).",
    )


class ProtocolError(BaseModel):
    error: str


class LoadAnswer(BaseModel):
    name: str
    version: str = Field(
        description="The version now serving (load), or the one that served until the unload "
        "(empty when none did)."
    )
    state: Literal["READY", "UNAVAILABLE"]


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ProtocolError, "description": description}
    for status, description in {
        400: "The load failed (the old version serves on), the model control does not take "
        "it, or the body is malformed",
        401: "Missing or wrong admin key",
        404: "No manifest of that model",
    }.items()
}


@router.post(
    "/index",
    response_model=list[RepositoryModel],
    response_model_exclude_none=True,
    responses={401: ERRORS[401], 400: ERRORS[400]},
    summary="Every manifest in the models folder, with its version and state",
)
async def repository_index(request: Request, service: ServiceDep) -> list[RepositoryModel]:
    body = await _json_body(request)
    ready_only = body.get("ready", False)
    if not isinstance(ready_only, bool):
        raise RepositoryRequestError("'ready' must be true or false")
    entries = await asyncio.to_thread(service.control.index)
    return [
        RepositoryModel(
            name=entry.name,
            version=entry.version,
            state=entry.state,
            reason=entry.reason or None,
        )
        for entry in entries
        if not ready_only or entry.state == "READY"
    ]


@router.post(
    "/models/{name}/load",
    response_model=LoadAnswer,
    responses=ERRORS,
    summary="Load a model from its manifest, or reload it when its version changed",
)
async def load_model(name: str, request: Request, service: ServiceDep) -> LoadAnswer:
    _check_parameters(await _json_body(request), LOAD_PARAMETERS_TAKEN, "load")
    served = await _finished(service.control.load(name))
    assert served is not None
    return LoadAnswer(name=served.name, version=served.version, state="READY")


@router.post(
    "/models/{name}/unload",
    response_model=LoadAnswer,
    responses=ERRORS,
    summary="Take a model out of service and free it",
)
async def unload_model(name: str, request: Request, service: ServiceDep) -> LoadAnswer:
    _check_parameters(await _json_body(request), UNLOAD_PARAMETERS_TAKEN, "unload")
    served = await _finished(service.control.unload(name))
    version = "" if served is None else served.version
    return LoadAnswer(name=name, version=version, state="UNAVAILABLE")


async def _finished(done: Future[ServedModel | None]) -> ServedModel | None:
    """The loader thread's answer; a client that leaves does not cancel the change."""
    return await asyncio.shield(asyncio.wrap_future(done))


async def _json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object; an empty body (Triton's client sends one) is ``{}``."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RepositoryRequestError(f"the body is not JSON: {error}") from None
    if not isinstance(body, dict):
        raise RepositoryRequestError("the body must be a JSON object")
    return body


def _check_parameters(body: dict[str, Any], taken: frozenset[str], action: str) -> None:
    parameters = body.get("parameters", {})
    if not isinstance(parameters, dict):
        raise RepositoryRequestError("'parameters' must be a JSON object")
    refused = sorted(set(parameters) - taken)
    if refused:
        raise RepositoryRequestError(
            f"{action} takes no parameter {', '.join(map(repr, refused))}: camserve loads each "
            "model from its manifest in the models folder (change the manifest, then load)"
        )
