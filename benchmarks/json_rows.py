"""The measured rows of a benchmark as a JSON file, for a program that collects several
benchmarks' results (``benchmarks/gpu/run.py``) instead of reading their printed tables."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path


def write_rows(path: str | Path | None, rows: Sequence[dict[str, object]], **about: object) -> None:
    """Write ``{"rows": rows, **about}`` to ``path``; nothing when ``path`` is None."""
    if path is not None:
        Path(path).write_text(json.dumps({"rows": list(rows), **about}, indent=1) + "\n")
