"""Turning a requested target (class index or label) into a class index."""

from __future__ import annotations

import re
from collections.abc import Sequence

from app.engine.errors import InvalidTargetError

__all__ = ["class_index"]

_INTEGER = re.compile(r"-?[0-9]+")
"""ASCII digits only: ``str.isdigit`` also accepts superscripts, which ``int`` refuses."""


def class_index(labels: Sequence[str] | None, target: int | str) -> int:
    """``target`` as a class index: an int as is, a label (exact, then case-insensitive), or a
    string of digits. Range checks are the caller's, who knows the number of classes."""
    if isinstance(target, bool):
        raise InvalidTargetError(f"target must be a class index or label, got {target!r}")
    if isinstance(target, int):
        return target
    text = target.strip()
    if labels is not None:
        if text in labels:
            return list(labels).index(text)
        folded = [label.casefold() for label in labels]
        if text.casefold() in folded:
            return folded.index(text.casefold())
    if _INTEGER.fullmatch(text):
        return int(text)
    raise InvalidTargetError(f"unknown class label {target!r}")
