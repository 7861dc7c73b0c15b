"""The resize policies a manifest names (``resize = "..."``), importable without torch, so that
manifests are read without it; ``resize_policy.py`` does the resizing."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ResizePolicy"]


class ResizePolicy(StrEnum):
    STRETCH = "stretch"
    LETTERBOX = "letterbox"
    SHORTER_SIDE = "shorter-side"
