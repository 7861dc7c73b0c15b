"""The ``camserve`` command's entry point: process settings that native libraries read when they
load, applied before torch is imported, then the command line.

OpenMP's threads (torch's intra-op pool, GNU libgomp) spin on a core for a while after every
parallel region before they sleep: 300,000 spins by default, several milliseconds. Between the
operators of one forward pass that keeps them warm; after a batch it keeps both cores of a small
machine busy while the codec threads encode the answer's PNGs, which then wait. camserve sets
``GOMP_SPINCOUNT`` to 10,000 spins (well under a millisecond) unless the environment already
sets it, which makes every request faster on a 2-core VM (measured in docs/benchmarks.md, "How
seven methods came under 1.5×").
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["OPENMP_SPIN_COUNT", "main", "prepare_process", "quick_exit"]

OPENMP_SPIN_COUNT = "10000"


def prepare_process() -> None:
    """Set the process-wide defaults above, unless the environment names its own or torch has
    already loaded OpenMP (it reads them once, at load time)."""
    if "torch" not in sys.modules:
        os.environ.setdefault("GOMP_SPINCOUNT", OPENMP_SPIN_COUNT)


def main() -> None:
    prepare_process()
    from camserve.cli import main as run_command_line  # noqa: PLC0415 - after prepare_process

    try:
        run_command_line()
    finally:
        quick_exit()


def quick_exit() -> None:
    """Leave the objects alive at the end to the process's exit, not to one last garbage
    collection: with torch, torchvision and their compiler stack imported, the interpreter's
    final collection walks millions of objects that the process is about to release anyway.
    ``gc.freeze`` moves them out of the collector's reach (atexit handlers and every object's
    own cleanup still run), so a stopped server or a finished command exits sooner
    (docs/benchmarks.md#measurements-behind-smaller-choices-in-the-code)."""
    gc.freeze()
