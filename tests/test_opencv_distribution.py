"""Exactly one OpenCV distribution provides ``cv2``: the headless one camserve depends on.

opencv-python, opencv-python-headless and their contrib builds all install the same ``cv2``
package; with two of them installed, whichever was installed last owns the files, and
uninstalling either one deletes files the other needs. Ultralytics requires opencv-python, so the
``yolo`` extra installs ultralytics with ``--no-deps`` (Makefile, Dockerfile; docs/yolo.md).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import cv2
import numpy as np
import torch

from tests.tolerances import assert_identical

OPENCV_DISTRIBUTIONS = frozenset(
    {
        "opencv-python",
        "opencv-python-headless",
        "opencv-contrib-python",
        "opencv-contrib-python-headless",
    }
)


def _installed_opencv() -> dict[str, metadata.Distribution]:
    found = {}
    for distribution in metadata.distributions():
        name = distribution.metadata["Name"].lower().replace("_", "-")
        if name in OPENCV_DISTRIBUTIONS:
            found[name] = distribution
    return found


def test_the_only_opencv_distribution_is_the_headless_one() -> None:
    assert sorted(_installed_opencv()) == ["opencv-python-headless"]


def test_cv2_is_the_headless_distributions_own_files_and_decodes_an_image() -> None:
    headless = _installed_opencv()["opencv-python-headless"]
    owned = {Path(str(headless.locate_file(file))).resolve() for file in headless.files or []}
    assert Path(cv2.__file__).resolve() in owned
    image = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    encoded_ok, encoded = cv2.imencode(".png", image)
    assert encoded_ok
    assert_identical(
        torch.from_numpy(cv2.imdecode(encoded, cv2.IMREAD_COLOR)), torch.from_numpy(image)
    )
