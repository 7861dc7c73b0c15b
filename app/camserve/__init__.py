"""camserve: CAM / Grad-CAM explanations of image classifiers, detectors and segmenters as a
service."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("camserve")
except PackageNotFoundError:  # sources on PYTHONPATH, not installed (the GPU run's device)
    __version__ = "0+unknown"
"""The installed version: one value, written once in ``client/camserve_client/VERSION``, which
both distributions (camserve and camserve-client) read when they are built."""

SUMMARY = "CAM / Grad-CAM explanations of image models: classifiers, detectors and segmenters."
"""What camserve does, in one sentence: the first line of ``camserve --help`` and of the API's
description."""
