"""The reference images of a served model's explanation report: the folder its manifest names
(``audit_images``), else the shipped samples named after the model, else the sample photos;
the first ``limit`` images by name, with a digest of their names and bytes."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from camserve.engine.errors import CamserveError, ImageError
from camserve.engine.images.image_files import find_images
from camserve.engine.images.imaging import decode_image
from camserve.quality.audit.reference import reference_folder
from camserve.quality.datasets import EvalSample

__all__ = ["ReferenceImages", "load_reference_images", "reference_folder_of"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReferenceImages:
    folder: Path
    samples: list[EvalSample]
    digest: str
    """SHA-256 over each image's name and bytes: another set, another report."""


def reference_folder_of(model: str, named: Path | None) -> Path:
    """The manifest's folder when it names one, else the shipped samples of ``model``."""
    return named if named is not None else reference_folder(model)


def load_reference_images(folder: Path, limit: int) -> ReferenceImages:
    """The first ``limit`` readable images under ``folder`` (recursively, by name); files that
    do not decode are logged and left out."""
    if not folder.is_dir():
        raise CamserveError(f"the reference images' folder {folder} is not a folder")
    digest = hashlib.sha256()
    samples: list[EvalSample] = []
    for image_file in find_images([folder]):
        if len(samples) == limit:
            break
        name = image_file.relative.as_posix()
        try:
            data = image_file.path.read_bytes()
            pixels = decode_image(data).pixels
        except (ImageError, OSError) as error:
            logger.warning("reference image %s left out: %s", image_file.path, error)
            continue
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
        samples.append(EvalSample(name, pixels, None, None))
    if not samples:
        raise CamserveError(f"no readable image in the reference images' folder {folder}")
    return ReferenceImages(folder, samples, digest.hexdigest())
