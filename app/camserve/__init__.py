"""camserve: CAM / Grad-CAM explanations of image classifiers, detectors and segmenters as a
service."""

from functools import cache

__version__: str
"""The installed version: one value, written once in ``client/camserve_client/VERSION``, which
both distributions (camserve and camserve-client) read when they are built. Looked up on first
use (``__getattr__``): importing ``importlib.metadata`` and reading the packages' metadata is a
cost every import of camserve (each command, server and worker process) would otherwise pay
(docs/benchmarks.md#measurements-behind-smaller-choices-in-the-code)."""

SUMMARY = "CAM / Grad-CAM explanations of image models: classifiers, detectors and segmenters."
"""What camserve does, in one sentence: the first line of ``camserve --help`` and of the API's
description."""


@cache
def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415  (on first use)

    try:
        return version("camserve")
    except PackageNotFoundError:  # sources on PYTHONPATH, not installed (the GPU run's device)
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return _installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
