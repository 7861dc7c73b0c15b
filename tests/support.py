"""Helpers shared by the service tests: small models that load in a second (random-weight
classifiers; camserve's trained shape detector and segmenter), and images for them."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from camserve.web.routes import SAMPLES_DIR
from camserve_lab.object_scenes import HELD_OUT_OBJECT_SCENES, ObjectScene, object_scene_at

TINY_LABELS = [f"shape {i}" for i in range(10)]


def write_test_models(folder: Path) -> Path:
    """Two quick models: ``tiny`` (resnet18, 10 classes) and ``mini`` (mobilenet_v3_small, 5
    classes), both random-initialised (seeded by the loader's torch seed) at 64×64 input."""
    folder.mkdir(parents=True, exist_ok=True)
    labels = ", ".join(f'"{label}"' for label in TINY_LABELS)
    (folder / "tiny.toml").write_text(
        'name = "tiny"\narchitecture = "resnet18"\nweights = "random"\n'
        f"num_classes = 10\nlabels = [{labels}]\ninput_size = 64\n"
    )
    (folder / "mini.toml").write_text(
        'name = "mini"\narchitecture = "mobilenet_v3_small"\nweights = "random"\n'
        "num_classes = 5\ninput_size = 64\n"
    )
    return folder


SHIPPED_MODELS = Path(__file__).resolve().parents[1] / "models"
"""The models folder of this checkout (what ``make serve`` serves)."""
DENSE_LABELS = ["__background__", "circle", "square", "triangle", "star", "cross"]


def write_dense_models(folder: Path) -> Path:
    """Two dense models that detect and segment for real: ``boxes``, camserve's trained shape
    detector, and ``regions``, its trained shape segmenter (the shipped checkpoints, read where
    they lie), so that their scores are decisive on the scenes of ``scene_bytes``."""
    folder.mkdir(parents=True, exist_ok=True)
    labels = ", ".join(f'"{label}"' for label in DENSE_LABELS)
    (folder / "boxes.toml").write_text(
        'name = "boxes"\ntask = "detection"\narchitecture = "shapes_fasterrcnn"\n'
        f'weights = "{SHIPPED_MODELS / "shapes-detector.pt"}"\nlabels = [{labels}]\n'
    )
    (folder / "regions.toml").write_text(
        'name = "regions"\ntask = "segmentation"\narchitecture = "shapes_segmenter"\n'
        f'weights = "{SHIPPED_MODELS / "shapes-segmenter.pt"}"\nlabels = [{labels}]\n'
        'input_size = [224, 224]\nresize = "letterbox"\n'
    )
    return folder


def scene_bytes(
    width: int = 200,
    height: int = 150,
    image_format: str = "PNG",
    seed: int = 0,
    min_objects: int = 3,
) -> bytes:
    """An encoded generated scene of shapes at ``width`` x ``height``: what the dense test
    models detect and segment decisively."""
    return encode_image(scene_pixels(width, height, seed, min_objects), image_format)


def scene_pixels(
    width: int, height: int, seed: int = 0, min_objects: int = 3
) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The first held-out object scene of ``seed`` with at least ``min_objects`` shapes,
    resized to ``width`` x ``height``."""
    (scene,) = held_out_scenes(1, seed, min_objects)
    resized = Image.fromarray(scene.image).resize((width, height), Image.Resampling.BILINEAR)
    return np.array(resized)


def write_scenes(folder: Path, sizes: Mapping[str, tuple[int, int]], seed: int) -> list[Path]:
    """A generated scene (``scene_pixels``, three or more shapes) at each of ``sizes`` (relative
    path -> (width, height)), the i-th of seed ``seed + i``, in the format its suffix names."""
    paths = []
    for index, (relative, (width, height)) in enumerate(sizes.items()):
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(scene_pixels(width, height, seed=seed + index)).save(path)
        paths.append(path)
    return paths


def held_out_scenes(count: int, seed: int = 1, min_objects: int = 2) -> list[ObjectScene]:
    """The first ``count`` held-out object scenes of ``seed`` with ``min_objects`` or more."""
    found: list[ObjectScene] = []
    index = 0
    while len(found) < count:
        scene = object_scene_at(seed, index, HELD_OUT_OBJECT_SCENES)
        if len(scene.objects) >= min_objects:
            found.append(scene)
        index += 1
    return found


def encode_image(pixels: np.ndarray[Any, np.dtype[np.uint8]], image_format: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, image_format)
    return buffer.getvalue()


def image_bytes(
    width: int = 80, height: int = 60, image_format: str = "PNG", seed: int = 0
) -> bytes:
    """A random RGB image, encoded."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return encode_image(pixels, image_format)


SAMPLE_PHOTOS = SAMPLES_DIR / "photos"
"""The page's sample photos (free licences, see their NOTICE)."""


def foreign_photos() -> list[Path]:
    """Colour photos that ship with scikit-image and matplotlib but not among the page's
    samples (a street, a telescope's field, a retina, a stained tissue, a gift pack): a set that
    camserve's own numbers were not tuned on."""
    import matplotlib  # noqa: PLC0415 (only the benchmarks need these folders)
    import skimage.data  # noqa: PLC0415

    skimage_data = Path(skimage.data.__file__).parent
    matplotlib_data = Path(matplotlib.get_data_path()) / "sample_data"
    names = ["motorcycle_left.png", "hubble_deep_field.jpg", "retina.jpg", "ihc.png"]
    return [skimage_data / name for name in names] + [
        matplotlib_data / "Minduka_Present_Blue_Pack.png"
    ]


def photo_bytes(
    index: int, width: int = 640, height: int = 480, photos: Sequence[Path] | None = None
) -> bytes:
    """A JPEG of ``width`` × ``height`` cut from one of ``photos`` (the page's sample photos
    unless given): the ``index``-th (in turn, each at its own random crop of 60 % or more of
    each side), so that every index gives another image with a real photo's detail."""
    paths = sorted(SAMPLE_PHOTOS.glob("*.jpg")) if photos is None else list(photos)
    rng = np.random.default_rng(index)
    with Image.open(paths[index % len(paths)]) as opened:
        photo = opened.convert("RGB")
    crop_w, crop_h = (round(side * rng.uniform(0.6, 1.0)) for side in photo.size)
    left = int(rng.integers(0, photo.width - crop_w + 1))
    top = int(rng.integers(0, photo.height - crop_h + 1))
    cut = photo.crop((left, top, left + crop_w, top + crop_h)).resize((width, height))
    buffer = io.BytesIO()
    cut.save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


BROKEN_PNG = b"\x89PNG\r\n\x1a\n and nothing after the signature"


def write_image_folder(folder: Path, sizes: Mapping[str, tuple[int, int]], seed: int = 0) -> Path:
    """Random RGB images at ``sizes`` (relative path → (width, height)), each in the format its
    suffix names, plus ``broken.png``: a PNG signature and nothing more."""
    rng = np.random.default_rng(seed)
    for relative, (width, height) in sizes.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
    (folder / "broken.png").write_bytes(BROKEN_PNG)
    return folder
