"""What the batching worker tells others of its versions: each version it makes current (at
start and on every reload, with the one it replaces) and each model it removes. The explanation
reports (``camserve.quality.served``) listen, to report every new version and its drift."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from camserve.serving.live_versions import LiveVersion

__all__ = ["VersionAnnouncer", "VersionObserver"]

logger = logging.getLogger(__name__)


class VersionObserver(Protocol):
    def installed(self, name: str, live: LiveVersion, previous: LiveVersion | None) -> None:
        """``live`` is ``name``'s current version now, in place of ``previous``, if any."""

    def removed(self, name: str) -> None:
        """``name`` is served no more."""


class VersionAnnouncer:
    """Tells the ``observer``, if any, outside the worker's lock; an observer's fault is
    logged, never raised into a load or the worker."""

    def __init__(self) -> None:
        self.observer: VersionObserver | None = None

    def installed(self, name: str, live: LiveVersion, previous: LiveVersion | None = None) -> None:
        self._tell(lambda observer: observer.installed(name, live, previous))

    def removed(self, name: str) -> None:
        self._tell(lambda observer: observer.removed(name))

    def _tell(self, message: Callable[[VersionObserver], None]) -> None:
        if self.observer is None:
            return
        try:
            message(self.observer)
        except Exception:
            logger.exception("the version observer failed")
