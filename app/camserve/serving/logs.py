"""Structured (JSON) logs, each line carrying the id of the request it belongs to."""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar

from pythonjsonlogger.json import JsonFormatter

__all__ = ["REQUEST_ID", "configure_logging"]

REQUEST_ID: ContextVar[str] = ContextVar("camserve_request_id", default="-")
"""The current request's id; set by the request middleware, read by every log record."""


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = REQUEST_ID.get()
        return True


def configure_logging(level: str) -> None:
    """Send JSON lines to stderr at ``level`` (replaces earlier camserve handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(request_id)s %(message)s",
            rename_fields={"levelname": "level", "asctime": "time", "name": "logger"},
        )
    )
    handler.addFilter(_RequestIdFilter())
    handler.set_name("camserve")
    root = logging.getLogger()
    for existing in [h for h in root.handlers if h.get_name() == "camserve"]:
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
