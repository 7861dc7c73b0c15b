"""When a call is sent again, and how long the client waits first.

An explanation has no side effects, so sending it again is always safe. The policy retries:

- 429 (camserve's queue is full) and 503 (models loading, or a proxy's full queue) after the
  answer's ``Retry-After`` (at most ``max_retry_after_s`` each; ``default_wait_s`` without one),
  for at most ``max_attempts`` sends and ``max_total_wait_s`` of waiting in all;
- a 500 or 408 that is not camserve's JSON error: the plain-text answer of a proxy (Ray Serve's)
  whose replica was lost, ``proxy_retries`` times (once by default);
- a connection that failed or dropped without an answer, ``connection_retries`` times.

camserve's own errors (every 4xx, a JSON 500, and the 503 ``model_unavailable`` of a model that
failed to load) are never retried: the same request would fail the same way.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from time import time

__all__ = ["RetryPolicy", "RetryState", "retry_after_seconds"]

BUSY = frozenset({429, 503})
"""Statuses that mean "later": waited out as ``Retry-After`` says."""
LASTING_CODES = frozenset({"model_unavailable"})
"""camserve's codes, under a busy status, for a state that no wait ends."""
LOST_REPLICA = frozenset({408, 500})
"""A proxy's statuses for a request whose replica died or never answered."""
JITTER = 0.2
"""Each wait is stretched by up to this fraction at random, so that clients refused together do
not all come back in the same instant."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 8
    """Most sends of one call while the answer is 429 or 503."""
    max_total_wait_s: float = 60.0
    """Most seconds one call waits between its sends, in all."""
    max_retry_after_s: float = 15.0
    """Most seconds one wait lasts, whatever ``Retry-After`` says."""
    default_wait_s: float = 1.0
    """The wait after a 429 or 503 without ``Retry-After`` (a lost replica's request or a
    dropped connection is sent again at once: the proxy routes it to a live replica)."""
    proxy_retries: int = 1
    connection_retries: int = 1

    @classmethod
    def never(cls) -> RetryPolicy:
        """Every call is sent once."""
        return cls(max_attempts=1, proxy_retries=0, connection_retries=0)


def retry_after_seconds(header: str | None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date; None if absent or
    unreadable."""
    if header is None:
        return None
    text = header.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - time())
    except (TypeError, ValueError):
        return None


@dataclass
class RetryState:
    """One call's retries so far, and the decision after each failed send."""

    policy: RetryPolicy
    sends: int = 1
    waited_s: float = 0.0
    proxy_retries: int = 0
    connection_retries: int = 0
    jitter: random.Random = field(default_factory=random.Random)

    def after_answer(
        self, status: int, from_camserve: bool, retry_after: str | None, code: str = ""
    ) -> float | None:
        """Seconds to wait before sending again after an error answer; None: give up."""
        if from_camserve and code in LASTING_CODES:
            return None
        if status in BUSY:
            if self.sends >= self.policy.max_attempts:
                return None
            wait = retry_after_seconds(retry_after)
            return self._wait(self.policy.default_wait_s if wait is None else wait)
        if status in LOST_REPLICA and not from_camserve:
            if self.proxy_retries >= self.policy.proxy_retries:
                return None
            self.proxy_retries += 1
            return self._wait(0.0)
        return None

    def after_connection_error(self) -> float | None:
        """Seconds to wait before sending again after no answer at all; None: give up."""
        if self.connection_retries >= self.policy.connection_retries:
            return None
        self.connection_retries += 1
        return self._wait(0.0)

    def _wait(self, seconds: float) -> float | None:
        wait = min(seconds, self.policy.max_retry_after_s) * (1 + JITTER * self.jitter.random())
        if self.waited_s + wait > self.policy.max_total_wait_s:
            return None
        self.waited_s += wait
        self.sends += 1
        return wait
