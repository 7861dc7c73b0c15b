"""camserve: CAM / Grad-CAM explanations of image classifiers, detectors and segmenters as a
service."""

__version__ = "0.1.0"

SUMMARY = "CAM / Grad-CAM explanations of image models: classifiers, detectors and segmenters."
"""What camserve does, in one sentence: the first line of ``camserve --help`` and of the API's
description."""
