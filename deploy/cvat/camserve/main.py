"""A CVAT detector that asks camserve where the evidence for each class lies.

nuclio calls ``init_context`` once per worker and ``handler`` per request. CVAT posts
``{"image": "<base64 frame>", "threshold": <minimum confidence, optional>}``; the handler sends
the image to camserve's ``POST /v1/explain`` and answers with CVAT shapes, for each explained
class and each region of its thresholded heatmap:

- ``rectangle``: ``points`` = ``[x0, y0, x1, y1]``, the region's box edges in pixel
  coordinates (camserve's exclusive ``x1``/``y1`` is the right/bottom edge);
- ``polygon``: ``points`` = the region's outline flattened to ``[x1, y1, x2, y2, ...]``;
- ``mask`` (one per class, all its regions): ``mask`` = the 0/1 pixels inside the mask's
  bounding box, row by row, followed by that box as inclusive pixel indices
  ``[xtl, ytl, xbr, ybr]``; CVAT run-length encodes it on arrival.

A detector's function (``CAMSERVE_TASK=detection``) returns the detector's own boxes instead:
one ``rectangle`` per detection scoring above ``CAMSERVE_SCORE_THRESHOLD`` (0.5), its
``confidence`` the detection's score; a segmenter's (``CAMSERVE_TASK=segmentation``) one
``mask`` per class it predicts (the background, class 0, left out), its ``confidence`` the
fraction of the image the class covers. CVAT's ``threshold`` drops detections below it; a
segmenter's masks are all returned.

Every shape carries ``label`` (the class, named as in the function's label spec),
``confidence`` (the class probability, as a string like CVAT's own functions) and no
``attributes``. Settings come from the environment (``function.yaml`` sets them):

- ``CAMSERVE_URL`` (required), ``CAMSERVE_MODEL``, ``CAMSERVE_METHOD`` (``gradcam``),
  ``CAMSERVE_LAYER``, ``CAMSERVE_API_KEY``;
- ``CAMSERVE_TOP_K`` (1) classes per image, ``CAMSERVE_THRESHOLD`` (0.5, or ``otsu``) and
  ``CAMSERVE_REGIONS`` (``all`` or ``largest``) for the heatmap regions;
- ``CAMSERVE_SHAPES`` (``rectangle,polygon,mask``), ``CAMSERVE_TIMEOUT_S`` (30);
- ``CAMSERVE_TASK`` (``classification``, ``detection`` or ``segmentation``) and
  ``CAMSERVE_SCORE_THRESHOLD`` (0.5, detectors);
- ``CAMSERVE_FUNCTION_YAML``: the function configuration whose label spec names the classes
  (default: ``function.yaml`` next to this file).

Only the standard library, numpy and Pillow run per request (PyYAML reads the label spec once),
so the function image stays small; importing this file needs no nuclio package.

This file holds nuclio's two entry points; the rest lives beside it, one job per module, and
ships with it (nuclio deploys the whole folder and imports from it): ``function_config.py``
the settings, ``label_spec.py`` the class names of ``function.yaml``, ``cvat_request.py``
CVAT's request, ``camserve_call.py`` the call to camserve, ``cvat_shapes.py`` and
``cvat_masks.py`` camserve's answer as CVAT shapes, ``function_error.py`` the error answer.
"""

from __future__ import annotations

import json
import os
from typing import Any

from camserve_call import JSON_TYPE, explain
from cvat_request import parse_request
from cvat_shapes import cvat_shapes
from function_config import Config
from function_error import FunctionError


def init_context(context: Any) -> None:
    """Read the settings once per worker."""
    config = Config.from_env(os.environ)
    context.user_data.config = config
    context.logger.info(
        f"camserve detector: {config.url}, model {config.model or '(default)'}, "
        f"method {config.method}, shapes {','.join(config.shapes)}"
    )


def handler(context: Any, event: Any) -> Any:
    """CVAT shapes for the base64 image in the request body, or a JSON error."""
    config: Config | None = getattr(context.user_data, "config", None)
    if config is None:
        config = Config.from_env(os.environ)
        context.user_data.config = config
    try:
        request = parse_request(event.body)
        explanation = explain(config, request.image)
        shapes = cvat_shapes(explanation, config, request.min_confidence)
    except FunctionError as error:
        context.logger.error(f"camserve detector: {error.status} {error.code}: {error.message}")
        return _json_response(context, error.body(), error.status)
    return _json_response(context, shapes, 200)


def _json_response(context: Any, body: object, status: int) -> Any:
    return context.Response(
        body=json.dumps(body), headers={}, content_type=JSON_TYPE, status_code=status
    )
