"""The headers that say what computed an answer of ``/v1/cam`` and ``/v1/explain``."""

from __future__ import annotations

from camserve.serving.service import Outcome

__all__ = ["MODEL_VERSION_HEADER", "PASS_HEADER", "SERVER_TIMING_HEADER", "computed_by"]

MODEL_VERSION_HEADER = "X-Camserve-Model-Version"
PASS_HEADER = "X-Camserve-Pass"
SERVER_TIMING_HEADER = "Server-Timing"
"""The W3C header browsers' developer tools show: the answer's queue wait and worker time."""


def computed_by(outcome: Outcome) -> dict[str, str]:
    """The headers that say what computed an answer: the model version, whether the image's
    kept pass answered it (``reused``) or the model ran (``computed``), and how long it waited
    in the queue and took in the worker (``Server-Timing``, milliseconds)."""
    result = outcome.result
    return {
        MODEL_VERSION_HEADER: outcome.model_version,
        PASS_HEADER: "reused" if result.pass_reused else "computed",
        SERVER_TIMING_HEADER: (
            f"queue;dur={1000 * result.queue_wait_s:.1f}, compute;dur={1000 * result.compute_s:.1f}"
        ),
    }
