"""Loading models where downloads are off (``CAMSERVE_ALLOW_DOWNLOADS=false``).

A model whose weights are not on this machine is refused before anything is built, with the
``camserve fetch-weights`` command that fills the cache (``weights_status``, which
``camserve models`` shows too). The Hugging Face libraries, through which timm and transformers
read the Hub, are put offline for the process (``HF_HUB_OFFLINE``), so that a model whose files
are cached loads from the cache without asking the Hub about newer revisions, and one whose
cache lacks a file fails instead of fetching it.
"""

from __future__ import annotations

import os
import sys

from camserve.engine.errors import WeightsUnavailableError
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.models.weights_status import weights_status

__all__ = ["DOWNLOADS_OFF", "hugging_face_offline", "require_local_weights"]

DOWNLOADS_OFF = "downloads are off (CAMSERVE_ALLOW_DOWNLOADS=false)"
HUB_OFFLINE_VARIABLE = "HF_HUB_OFFLINE"


def require_local_weights(spec: ModelSpec) -> None:
    """Raise ``WeightsUnavailableError`` naming ``spec``'s model and the command that fetches
    its weights when loading it would download them; the Hub stays offline for its load. (A
    checkpoint that is not there, or weights a source does not publish, are left to the
    loader, which refuses them in its own words without downloading anything.)"""
    hugging_face_offline()
    status = weights_status(spec)
    if status.needs_download:
        raise WeightsUnavailableError(
            f"model {spec.name!r}: {DOWNLOADS_OFF}, and its weights are not on this machine: "
            f"{status.detail}"
        )


def hugging_face_offline() -> None:
    """Keep ``huggingface_hub`` from reaching the Hub in this process: through the variable it
    reads when first imported, and through its setting when it was imported already."""
    os.environ[HUB_OFFLINE_VARIABLE] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True  # type: ignore[attr-defined]  # read at each request
