"""Who a request comes from: the name of the API key it presents, else its client's address.

Keys are named (``CAMSERVE_API_KEYS=alice:secret1,bob:secret2``, or a file of ``name:key``
lines, read by ``camserve.config``); the single ``CAMSERVE_API_KEY`` is named ``key`` and the start
of its sha256. A caller's name is what the logs, the metrics and the queue's fair shares count
its requests under, never the key itself. Metrics label a caller by its key's name, and every
caller known only by its address as ``anonymous`` (``prometheus.py``): key names are a fixed
set, addresses are not.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import SecretStr

from camserve.config import Settings

__all__ = ["KeyRing"]


@dataclass(frozen=True)
class KeyRing:
    """The service's API keys by name (empty: no key is needed)."""

    keys: Mapping[str, SecretStr]

    @classmethod
    def of(cls, settings: Settings) -> KeyRing:
        return cls(settings.named_api_keys)

    def __bool__(self) -> bool:
        return bool(self.keys)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.keys)

    def name_of(self, given: str) -> str | None:
        """The name of the key ``given``, or ``None``; compares against every key in constant
        time, so the answer's timing tells nothing of which key came close."""
        found = None
        for name, key in self.keys.items():
            if secrets.compare_digest(given.encode(), key.get_secret_value().encode()):
                found = name
        return found
