"""JSON answers that carry images as base64 strings, serialised by orjson.

An ``/v1/explain`` answer holds its overlays and heatmaps as base64 text, megabytes of it for
several methods. FastAPI's default serialiser (Pydantic's) escapes such strings character by
character on the event loop; orjson checks them with vector instructions and writes the same
JSON many times faster (docs/benchmarks.md, "How seven methods came under 1.5×").
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import JSONResponse

__all__ = ["ImageJSONResponse"]


class ImageJSONResponse(JSONResponse):
    """``application/json`` written by orjson (non-finite floats become ``null``, as Pydantic's
    JSON mode writes them)."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
