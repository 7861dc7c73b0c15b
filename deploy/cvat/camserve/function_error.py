"""The one error the function answers with instead of shapes: an HTTP status, a code and a
message, in camserve's ``{"error": {"code", "message"}}`` form."""

from __future__ import annotations

from typing import Any


class FunctionError(Exception):
    """A request the function cannot answer with shapes: HTTP status, code and message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}
