"""Masks from camserve's form to CVAT's: camserve sends a base64 PNG (255 inside), a CVAT
detector answers with the 0/1 pixels of the mask's bounding box followed by that box."""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
from PIL import Image


def decode_mask(encoded: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """camserve's base64 PNG mask (255 inside) as a boolean array."""
    with Image.open(io.BytesIO(base64.b64decode(encoded))) as image:
        return np.asarray(image.convert("L")) > 127


def cvat_mask(mask: np.ndarray[Any, np.dtype[np.bool_]]) -> list[int] | None:
    """CVAT's detector mask: the 0/1 pixels of ``mask``'s bounding box, row-major, then the box
    as inclusive pixel indices ``[xtl, ytl, xbr, ybr]``; ``None`` for an empty mask."""
    rows = np.flatnonzero(mask.any(axis=1))
    columns = np.flatnonzero(mask.any(axis=0))
    if rows.size == 0:
        return None
    top, bottom = int(rows[0]), int(rows[-1])
    left, right = int(columns[0]), int(columns[-1])
    pixels: list[int] = mask[top : bottom + 1, left : right + 1].astype(np.uint8).ravel().tolist()
    return [*pixels, left, top, right, bottom]
