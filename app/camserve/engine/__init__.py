"""The CAM engine: build from an ``nn.Module`` or a model name, explain batches of images.

Importable without FastAPI; the HTTP service, the CLI and the labeling adapters all use it.
The names below load on first use, so that ``camserve.engine.errors`` or a manifest can be read
without importing torch (``camserve models`` lists the manifests in well under a second).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from camserve.engine.engine import CamEngine, CamMaps, Explanation
    from camserve.engine.images.preprocess import Preprocessing
    from camserve.engine.images.render import RenderedImage
    from camserve.engine.methods import METHODS
    from camserve.engine.run_control import RunControl

__all__ = ["METHODS", "CamEngine", "CamMaps", "Explanation", "Preprocessing", "RenderedImage"]
__all__ += ["RunControl"]

_MODULE_OF = {
    "CamEngine": "camserve.engine.engine",
    "CamMaps": "camserve.engine.engine",
    "Explanation": "camserve.engine.engine",
    "Preprocessing": "camserve.engine.images.preprocess",
    "RenderedImage": "camserve.engine.images.render",
    "METHODS": "camserve.engine.methods",
    "RunControl": "camserve.engine.run_control",
}


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'camserve.engine' has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE_OF[name]), name)
