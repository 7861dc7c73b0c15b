"""Ray for one dataset job: the connection (the present one, a cluster at an address, or a
local Ray on 127.0.0.1 of the job's own), and how much of Ray's own output reaches the
terminal.

Quiet (the default), camserve's lines are the only ones: the driver's ``ray`` logger and Ray
Data's console handler show errors only (Ray Data still writes its full log to the session's
``logs/ray-data`` folder), Ray Data draws no progress bars, the workers' output stays in their
log files instead of being copied to the driver, and the C++ core worker of this process logs
fatal errors only (``RAY_BACKEND_LOG_LEVEL``, read when ``ray.init`` starts it: it warns, at
error level, about every Ray Data actor, whose constructor arguments live in the object store
while it may be restarted). The processes of a local Ray, started by ``ray.init`` too, log at
that level to their files as well. The one line Ray's C++ logger writes to say it read that
setting is taken out of what ``ray.init`` writes to stderr; the rest is passed on. With
``verbose`` all of it is back, as Ray would have it. A setting the environment already holds is
left as it is.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import ray
import ray.data
import torch

__all__ = [
    "LOCAL_RAY_ENVIRONMENT",
    "QUIET_RAY_ENVIRONMENT",
    "RayOutput",
    "quiet_ray_data",
    "ray_connection",
    "stderr_without",
]

LOCAL_RAY_ENVIRONMENT = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}
"""Set for a local Ray (and left set): on 127.0.0.1 only, no usage report."""
QUIET_RAY_ENVIRONMENT = {"RAY_BACKEND_LOG_LEVEL": "fatal"}
"""Set while ``ray.init`` starts this process's core worker, unless verbose."""
LEVEL_SET_LINE = re.compile(r"logging\.cc:\d+: Set ray log level from environment variable")
"""What Ray's C++ logger writes, whatever its level, where ``RAY_BACKEND_LOG_LEVEL`` is set."""
STDERR = 2
"""stderr's file descriptor."""
RAY_DATA_LOGGER = "ray.data"
RAY_DATA_CONSOLE_HANDLER = "console"
"""The handler of Ray Data's logging configuration that writes to stderr."""


@dataclass(frozen=True)
class RayOutput:
    """What of Ray's own output reaches the terminal."""

    verbose: bool = False

    @property
    def logging_level(self) -> int:
        """The driver's ``ray`` logger."""
        return logging.INFO if self.verbose else logging.ERROR

    @property
    def environment(self) -> Mapping[str, str]:
        """Set while Ray starts (``LOCAL_RAY_ENVIRONMENT`` is set for a local Ray too)."""
        return {} if self.verbose else QUIET_RAY_ENVIRONMENT


@contextmanager
def ray_connection(
    address: str | None, object_store_bytes: int, output: RayOutput | None = None
) -> Iterator[None]:
    """Ray for the job: the present connection, the cluster at ``address``, or a local Ray on
    127.0.0.1; only a connection opened here is closed afterwards."""
    output = output or RayOutput()
    quiet_ray_data(output)
    if ray.is_initialized():
        yield
        return
    settings: dict[str, Any] = {
        "logging_level": output.logging_level,
        "log_to_driver": output.verbose,
    }
    if address is None:
        for key, value in LOCAL_RAY_ENVIRONMENT.items():
            os.environ.setdefault(key, value)
        with _environment(output.environment), stderr_without(output, LEVEL_SET_LINE):
            ray.init(
                address="local",  # a new Ray of its own, never one already running here
                num_cpus=os.cpu_count() or 1,
                num_gpus=torch.cuda.device_count(),
                object_store_memory=object_store_bytes,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                **settings,
            )
    else:
        with _environment(output.environment), stderr_without(output, LEVEL_SET_LINE):
            ray.init(address=address, **settings)
    try:
        yield
    finally:
        ray.shutdown()


def quiet_ray_data(output: RayOutput) -> None:
    """Ray Data's progress bars and console log as ``output`` asks: both on where verbose, else
    no bars and errors only (its log file keeps everything)."""
    ray.data.DataContext.get_current().enable_progress_bars = output.verbose
    level = logging.INFO if output.verbose else logging.ERROR
    for handler in logging.getLogger(RAY_DATA_LOGGER).handlers:
        if handler.name == RAY_DATA_CONSOLE_HANDLER:
            handler.setLevel(level)


@contextmanager
def _environment(settings: Mapping[str, str]) -> Iterator[None]:
    """``settings`` in the environment while the block runs, except those it already holds."""
    added = {key: value for key, value in settings.items() if key not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


@contextmanager
def stderr_without(output: RayOutput, unwanted: re.Pattern[str]) -> Iterator[None]:
    """Unless verbose: what this process writes to its stderr while the block runs (file
    descriptor 2, so C++ libraries' lines too) is held in a file, then written out without
    the lines ``unwanted`` matches, also where the block fails."""
    if output.verbose:
        yield
        return
    sys.stderr.flush()
    original = os.dup(STDERR)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), STDERR)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(original, STDERR)
            os.close(original)
            held.seek(0)
            lines = held.read().decode(errors="replace").splitlines(keepends=True)
            sys.stderr.write("".join(line for line in lines if not unwanted.search(line)))
            sys.stderr.flush()
