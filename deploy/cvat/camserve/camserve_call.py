"""The function's one call to camserve, ``POST /v1/explain`` with the query its settings ask
for; camserve's errors come back as ``FunctionError`` with a status that fits a gateway."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from function_config import Config
from function_error import FunctionError

INCLUDE_FOR_SHAPE = {"rectangle": "boxes", "polygon": "polygons", "mask": "masks"}
PASSED_THROUGH = frozenset({400, 413, 415, 422, 429, 503, 504})
"""camserve statuses that describe the request or a passing state; others mean the function
is misconfigured or camserve failed, and become 502."""
BAD_GATEWAY = 502
GATEWAY_TIMEOUT = 504
JSON_TYPE = "application/json"


def explain_url(config: Config) -> str:
    """``/v1/explain`` with the query that asks for the regions of the configured shapes (a
    detector's boxes, none of them explained; a segmenter's masks)."""
    choice = {**({"model": config.model} if config.model else {})}
    if config.task == "detection":
        query = {"score_threshold": config.score_threshold, "max_detections": "0", **choice}
        return f"{config.url}/v1/explain?{urllib.parse.urlencode(query)}"
    if config.task == "segmentation":
        return f"{config.url}/v1/explain?{urllib.parse.urlencode(choice)}"
    query = {
        "method": config.method,
        "top_k": str(config.top_k),
        "include": ",".join(INCLUDE_FOR_SHAPE[shape] for shape in config.shapes),
        "threshold": config.threshold,
        "regions": config.regions,
        **({"model": config.model} if config.model else {}),
        **({"layer": config.layer} if config.layer else {}),
    }
    return f"{config.url}/v1/explain?{urllib.parse.urlencode(query)}"


def explain(config: Config, image: bytes) -> dict[str, Any]:
    """camserve's ``/v1/explain`` answer for ``image``; its errors as ``FunctionError``."""
    headers = {"Content-Type": "application/octet-stream", "Accept": JSON_TYPE}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    request = urllib.request.Request(explain_url(config), data=image, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as response:
            answer: dict[str, Any] = json.load(response)
            return answer
    except urllib.error.HTTPError as error:
        with error:
            raise _camserve_error(error.code, error.read()) from None
    except TimeoutError:
        raise _timed_out(config) from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, TimeoutError):
            raise _timed_out(config) from None
        raise FunctionError(
            BAD_GATEWAY,
            "camserve_unreachable",
            f"cannot reach camserve at {config.url}: {error.reason}",
        ) from None


def _timed_out(config: Config) -> FunctionError:
    return FunctionError(
        GATEWAY_TIMEOUT,
        "camserve_timeout",
        f"camserve at {config.url} did not answer within {config.timeout_s:g} s",
    )


def _camserve_error(status: int, body: bytes) -> FunctionError:
    """camserve's ``{"error": {"code", "message"}}`` with a status that fits the function."""
    try:
        error = json.loads(body)["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "camserve_error", body.decode(errors="replace").strip()[:500]
    return FunctionError(status if status in PASSED_THROUGH else BAD_GATEWAY, code, message)
