"""Routes of the browser page: ``/`` (the HTML), ``/static/<file>``, the colormap tables, and
the sample images (``/static/samples.json`` lists those in ``static/samples/``).

The samples' groups come from the folder: each sub-folder of ``static/samples/`` is a group
named after it (``photos/``, ``shapes/``), shown under its own heading on the page; images
directly in ``static/samples/`` belong to no group. Adding a group is adding a folder. A group
whose folder is named after a served model (``shapes-detector/``, ``shapes-segmenter/``) holds
that model's samples: the page explains them with it.

The files in ``static/`` are plain HTML, CSS and JavaScript modules (no build step, nothing
fetched from elsewhere). Each gets its own fixed route, found when this module is imported, so
nothing outside that folder can be asked for and the request metrics keep a fixed set of route
labels. The page holds no data, so none of these routes needs the API key; the page sends the
key the user types on its own calls to ``/v1``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import cache
from pathlib import Path

import torch
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from camserve.engine.images.colormaps import COLORMAPS, colormap_table

__all__ = [
    "ASSET_PREFIX",
    "COLORMAPS_PATH",
    "SAMPLES_DIR",
    "SAMPLES_PATH",
    "SAMPLE_PREFIX",
    "STATIC_DIR",
    "asset_paths",
    "router",
    "sample_paths",
]

STATIC_DIR = Path(__file__).parent / "static"
SAMPLES_DIR = STATIC_DIR / "samples"
ASSET_PREFIX = "/static/"
SAMPLE_PREFIX = ASSET_PREFIX + "samples/"
COLORMAPS_PATH = ASSET_PREFIX + "colormaps.json"
SAMPLES_PATH = ASSET_PREFIX + "samples.json"
INDEX = "index.html"

MEDIA_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
}
SAMPLE_MEDIA_TYPES = {
    ".jpeg": "image/jpeg",
    ".jpg": "image/jpeg",
    ".png": "image/png",
    ".webp": "image/webp",
}

COMMON_HEADERS = {
    # Revalidate on every load (the ETag turns that into a 304), so an upgrade shows at once.
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
}
PAGE_HEADERS = {
    **COMMON_HEADERS,
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' blob: data:; object-src 'none'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
}

router = APIRouter(include_in_schema=False)


def asset_paths() -> dict[str, Path]:
    """Every file the page may load, by URL path (``index.html`` is served at ``/``)."""
    return {
        ASSET_PREFIX + path.name: path
        for path in sorted(STATIC_DIR.iterdir())
        if path.is_file() and path.suffix in MEDIA_TYPES and path.name != INDEX
    }


def sample_paths() -> dict[str, Path]:
    """Every sample image, by URL path: the groups' in the order of the groups' folder names,
    then those in no group; within each, in the order of their names."""
    if not SAMPLES_DIR.is_dir():
        return {}
    groups = [path for path in sorted(SAMPLES_DIR.iterdir()) if path.is_dir()]
    return {
        SAMPLE_PREFIX + path.relative_to(SAMPLES_DIR).as_posix(): path
        for folder in (*groups, SAMPLES_DIR)
        for path in sorted(folder.iterdir())
        if path.is_file() and path.suffix.lower() in SAMPLE_MEDIA_TYPES
    }


def _file_endpoint(path: Path, headers: dict[str, str]) -> Callable[[Request], Response]:
    media_type = {**MEDIA_TYPES, **SAMPLE_MEDIA_TYPES}[path.suffix.lower()]

    def send_file(request: Request) -> Response:
        body = path.read_bytes()
        tag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        answer_headers = {**headers, "ETag": tag}
        if _matches(request.headers.get("if-none-match", ""), tag):
            return Response(status_code=304, headers=answer_headers)
        return Response(body, media_type=media_type, headers=answer_headers)

    return send_file


def _matches(if_none_match: str, tag: str) -> bool:
    """Whether an If-None-Match header names ``tag`` (weakly compared, as RFC 9110 asks)."""
    given = (item.strip() for item in if_none_match.split(","))
    return any(item == "*" or item.removeprefix("W/") == tag for item in given)


@cache
def _colormap_tables() -> dict[str, list[list[int]]]:
    cpu = torch.device("cpu")
    return {name: colormap_table(name, cpu).tolist() for name in COLORMAPS}


@router.get(COLORMAPS_PATH)
async def colormaps() -> JSONResponse:
    """The server's colormaps as 256 [r, g, b] rows each, so the page blends exactly as it does."""
    return JSONResponse(_colormap_tables(), headers=COMMON_HEADERS)


@router.get(SAMPLES_PATH)
async def samples() -> JSONResponse:
    """The sample images the page offers: ``{"samples": [{"name", "url", "bytes", "group",
    "folder"}, ...]}``, where the name is the file's stem and the group its sub-folder's name,
    both with ``-`` and ``_`` read as spaces, and the folder that sub-folder's name as it is
    (the model the page explains the sample with, if one is served by that name); group and
    folder are ``null`` for an image directly in ``static/samples/``."""
    listed = [
        {
            "name": _readable(path.stem),
            "url": url,
            "bytes": path.stat().st_size,
            "group": None if path.parent == SAMPLES_DIR else _readable(path.parent.name),
            "folder": None if path.parent == SAMPLES_DIR else path.parent.name,
        }
        for url, path in sample_paths().items()
    ]
    return JSONResponse({"samples": listed}, headers=COMMON_HEADERS)


def _readable(name: str) -> str:
    return " ".join(name.replace("_", " ").replace("-", " ").split())


def _add_file_routes() -> None:
    router.add_api_route("/", _file_endpoint(STATIC_DIR / INDEX, PAGE_HEADERS), methods=["GET"])
    for url, path in {**asset_paths(), **sample_paths()}.items():
        router.add_api_route(url, _file_endpoint(path, COMMON_HEADERS), methods=["GET"])


_add_file_routes()
