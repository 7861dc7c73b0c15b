"""What an unknown architecture's error says: the closest names, and where the whole list is,
never the list itself (torchvision alone has about eighty classifiers, which buried the
suggestion in the log, the start-up report, ``/readyz`` and ``GET /v1/models``)."""

from __future__ import annotations

from collections.abc import Sequence
from difflib import get_close_matches

__all__ = ["LIST_COMMAND", "closest_names", "suggestion"]

LIST_COMMAND = "camserve models --architectures"
"""The command that lists every architecture camserve can serve, by task."""


def closest_names(name: str, known: Sequence[str]) -> list[str]:
    """The known name spelled the same but for case and separators (``ResNet-18``:
    ``resnet18``), else up to three that ``difflib`` finds close."""
    folded = _folded(name)
    same = [candidate for candidate in known if _folded(candidate) == folded]
    return same or get_close_matches(name.lower(), known, n=3)


def suggestion(name: str, known: Sequence[str]) -> str:
    """``did you mean X or Y? `` (empty when nothing is close), then where the list is."""
    close = closest_names(name, known)
    guess = f"did you mean {' or '.join(close)}? " if close else ""
    return f"{guess}`{LIST_COMMAND}` lists the supported ones"


def _folded(name: str) -> str:
    return "".join(character for character in name.lower() if character.isalnum())
