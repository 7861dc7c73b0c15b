"""A second, independent generator of labelled shape scenes, for out-of-distribution checks.

It shares nothing with ``scenes.py`` but the five class names and the ``Scene`` record: its
images are drawn with Pillow's ``ImageDraw`` (not OpenCV), on real photographs and photo
textures from scikit-image's bundled data (brick, grass, gravel tinted in two colours; crops of
the astronaut, coffee, cat, rocket, Hubble, retina and microscopy pictures), at photo aspect
ratios (1:1, 4:3, 3:2, 16:9, 2:1, either way up). Clutter is scribbles, printed text,
hatching, confetti and grid lines; distractors are pie slices, chords and hollow ellipses. The
target shape (its own proportions: star points 0.36-0.52 deep, cross arms of varied width) is
filled flat, with a two-colour gradient, or with an outline in another colour, sometimes casts
a soft shadow, and may be partly covered by a leaf or a strip of tape drawn over it.

The demo model never trains on these scenes (``training.py`` does not import this module;
``tests/lab/test_foreign_scenes.py`` checks it): they measure how far what it learned
from ``scenes.py`` carries over. Scene ``i`` of seed ``s`` is always the same image.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Callable, Iterator
from functools import cache

import numpy as np
from numpy.typing import NDArray
from PIL import Image, ImageDraw, ImageFilter, ImageFont
from skimage import data as photos

from camserve_lab.scenes import SHAPES, Scene

__all__ = ["PHOTOS", "foreign_scene", "foreign_scenes"]

Rgb = tuple[int, int, int]
Points = list[tuple[float, float]]

PHOTOS: dict[str, Callable[[], NDArray[np.uint8]]] = {
    "brick": photos.brick,
    "grass": photos.grass,
    "gravel": photos.gravel,
    "astronaut": photos.astronaut,
    "coffee": photos.coffee,
    "chelsea": photos.chelsea,
    "rocket": photos.rocket,
    "hubble": photos.hubble_deep_field,
    "retina": photos.retina,
    "microscopy": photos.immunohistochemistry,
}
"""Background sources; the grey textures (brick, grass, gravel) are tinted in two colours."""
ASPECTS = (1.0, 4 / 3, 3 / 2, 16 / 9, 2.0)
SUPERSAMPLE = 4
"""Shapes are drawn at this many times the size and reduced, for smooth edges."""
LEAST_CONTRAST = 80.0


def foreign_scenes(seed: int, count: int) -> Iterator[Scene]:
    """The first ``count`` foreign scenes of ``seed``."""
    for index in range(count):
        yield foreign_scene(seed, index)


def foreign_scene(seed: int, index: int) -> Scene:
    """Foreign scene ``index`` of ``seed``."""
    rng = np.random.default_rng([seed, index, 0xF0E1])
    width, height = _canvas_size(rng)
    canvas = _photo_background(rng, width, height)
    _clutter(rng, canvas)
    radius = float(rng.uniform(0.18, 0.40)) * min(width, height)
    _distractors(rng, canvas, radius)
    label = int(rng.integers(len(SHAPES)))
    outline = _shape_outline(rng, SHAPES[label], radius, width, height)
    mask = _polygon_mask(outline, width, height)
    _draw_target(rng, canvas, outline, mask)
    _occlude(rng, canvas, outline, radius)
    pixels = np.asarray(canvas.convert("RGB"), dtype=np.uint8).copy()
    return Scene(image=pixels, label=label, box=_mask_box(mask))


def _canvas_size(rng: np.random.Generator) -> tuple[int, int]:
    long_side = round(math.exp(rng.uniform(math.log(96), math.log(1000))))
    aspect = float(ASPECTS[int(rng.integers(len(ASPECTS)))])
    short_side = max(round(long_side / aspect), 48)
    return (long_side, short_side) if rng.uniform() < 0.6 else (short_side, long_side)


def _colour(rng: np.random.Generator) -> Rgb:
    hue, saturation, value = rng.uniform(0, 1), rng.uniform(0.0, 1.0), rng.uniform(0.05, 1.0)
    red, green, blue = colorsys.hsv_to_rgb(hue, saturation, value)
    return round(red * 255), round(green * 255), round(blue * 255)


@cache
def _photo(name: str) -> NDArray[np.uint8]:
    return np.asarray(PHOTOS[name](), dtype=np.uint8)


def _photo_background(rng: np.random.Generator, width: int, height: int) -> Image.Image:
    """A random crop of a random photo, resized to the canvas, tinted if it is grey."""
    name = sorted(PHOTOS)[int(rng.integers(len(PHOTOS)))]
    source = _photo(name)
    rows, cols = source.shape[:2]
    scale = rng.uniform(0.35, 1.0)
    crop_w = min(cols, max(16, round(scale * min(cols, rows * width / height))))
    crop_h = min(rows, max(16, round(crop_w * height / width)))
    x0, y0 = int(rng.integers(cols - crop_w + 1)), int(rng.integers(rows - crop_h + 1))
    crop = source[y0 : y0 + crop_h, x0 : x0 + crop_w]
    if crop.ndim == 2:
        dark, light = np.array(_colour(rng), np.float32), np.array(_colour(rng), np.float32)
        level = crop[..., None].astype(np.float32) / 255
        crop = np.round(dark * (1 - level) + light * level).astype(np.uint8)
    image = Image.fromarray(np.ascontiguousarray(crop[..., :3])).convert("RGB")
    return image.resize((width, height), Image.Resampling.BICUBIC)


def _clutter(rng: np.random.Generator, canvas: Image.Image) -> None:
    """Between none and several of the clutter styles, each drawn a random number of times."""
    draw = ImageDraw.Draw(canvas)
    styles = (_scribble, _text, _hatching, _confetti, _grid)
    for _ in range(int(rng.integers(0, 5))):
        styles[int(rng.integers(len(styles)))](rng, draw, canvas.size)


def _random_point(rng: np.random.Generator, size: tuple[int, int]) -> tuple[float, float]:
    return float(rng.uniform(0, size[0])), float(rng.uniform(0, size[1]))


def _line_width(rng: np.random.Generator, size: tuple[int, int], low: float, high: float) -> int:
    return max(1, round(rng.uniform(low, high) * max(size) / 400))


def _scribble(rng: np.random.Generator, draw: ImageDraw.ImageDraw, size: tuple[int, int]) -> None:
    """A wandering pen line: a random walk with momentum."""
    x, y = _random_point(rng, size)
    heading, step = rng.uniform(0, 2 * math.pi), max(size) / 30
    points = [(x, y)]
    for _ in range(int(rng.integers(8, 40))):
        heading += rng.normal(0, 0.6)
        x, y = x + step * math.cos(heading), y + step * math.sin(heading)
        points.append((x, y))
    draw.line(points, fill=_colour(rng), width=_line_width(rng, size, 1, 5), joint="curve")


def _text(rng: np.random.Generator, draw: ImageDraw.ImageDraw, size: tuple[int, int]) -> None:
    letters = "ABCDEFGHJKLMNPRSTUVWXYZ0123456789 "
    words = "".join(
        letters[int(i)] for i in rng.integers(len(letters), size=int(rng.integers(3, 12)))
    )
    font = ImageFont.load_default(size=max(8.0, float(rng.uniform(0.04, 0.12)) * min(size)))
    draw.text(_random_point(rng, size), words, fill=_colour(rng), font=font)


def _hatching(rng: np.random.Generator, draw: ImageDraw.ImageDraw, size: tuple[int, int]) -> None:
    """A patch of short parallel lines."""
    x, y = _random_point(rng, size)
    angle, length = rng.uniform(0, math.pi), rng.uniform(0.05, 0.2) * max(size)
    gap, colour = max(3.0, length / rng.uniform(4, 10)), _colour(rng)
    dx, dy = math.cos(angle) * length, math.sin(angle) * length
    for k in range(int(rng.integers(3, 9))):
        ox, oy = -math.sin(angle) * gap * k, math.cos(angle) * gap * k
        draw.line([(x + ox, y + oy), (x + ox + dx, y + oy + dy)], fill=colour, width=1)


def _confetti(rng: np.random.Generator, draw: ImageDraw.ImageDraw, size: tuple[int, int]) -> None:
    """Small scattered squares and dots."""
    for _ in range(int(rng.integers(5, 30))):
        x, y = _random_point(rng, size)
        half = max(1.0, rng.uniform(0.004, 0.015) * max(size))
        box = (x - half, y - half, x + half, y + half)
        if rng.uniform() < 0.5:
            draw.rectangle(box, fill=_colour(rng))
        else:
            draw.ellipse(box, fill=_colour(rng))


def _grid(rng: np.random.Generator, draw: ImageDraw.ImageDraw, size: tuple[int, int]) -> None:
    """Thin lines at a regular spacing across the whole image, one direction."""
    spacing, colour = rng.uniform(0.05, 0.2) * max(size), _colour(rng)
    vertical = rng.uniform() < 0.5
    for k in range(1, int(max(size) / spacing) + 1):
        at = k * spacing
        ends = [(at, 0.0), (at, size[1])] if vertical else [(0.0, at), (size[0], at)]
        draw.line(ends, fill=colour, width=1)


def _distractors(rng: np.random.Generator, canvas: Image.Image, radius: float) -> None:
    """Pie slices, chords and hollow ellipses, smaller than the target."""
    draw = ImageDraw.Draw(canvas)
    for _ in range(int(rng.integers(0, 3))):
        r = radius * rng.uniform(0.3, 0.7)
        x, y = _random_point(rng, canvas.size)
        box = (x - r, y - r * rng.uniform(0.5, 1.0), x + r, y + r)
        start = float(rng.uniform(0, 360))
        end = start + float(rng.uniform(60, 300))
        kind = int(rng.integers(3))
        if kind == 0:
            draw.pieslice(box, start, end, fill=_colour(rng))
        elif kind == 1:
            draw.chord(box, start, end, fill=_colour(rng))
        else:
            draw.ellipse(box, outline=_colour(rng), width=max(1, round(r / 8)))


def _shape_outline(
    rng: np.random.Generator, shape: str, radius: float, width: int, height: int
) -> Points:
    """The target's polygon (a circle as 72 points), rotated, fully inside the canvas."""
    turn = rng.uniform(0, 2 * math.pi)
    if shape == "circle":
        polar = [(k * math.pi / 36, 1.0) for k in range(72)]
    elif shape == "square":
        polar = [(math.pi / 4 + k * math.pi / 2, 1.0) for k in range(4)]
    elif shape == "triangle":
        polar = [(k * 2 * math.pi / 3, 1.0) for k in range(3)]
    elif shape == "star":
        depth = rng.uniform(0.36, 0.52)
        polar = [(k * math.pi / 5, 1.0 if k % 2 == 0 else depth) for k in range(10)]
    else:
        polar = _cross_polar(rng.uniform(0.28, 0.45))
    margin = radius + 2
    cx = rng.uniform(margin, max(margin, width - margin))
    cy = rng.uniform(margin, max(margin, height - margin))
    return [
        (cx + radius * r * math.cos(a + turn), cy + radius * r * math.sin(a + turn))
        for a, r in polar
    ]


def _cross_polar(arm: float) -> list[tuple[float, float]]:
    """A plus sign's twelve corners as (angle, radius), arms of half-width ``arm``."""
    corners = []
    for quarter in range(4):
        base = quarter * math.pi / 2
        for x, y in ((1.0, -arm), (1.0, arm), (arm, arm)):
            angle = math.atan2(y, x) + base
            corners.append((angle, math.hypot(x, y)))
    return corners


def _polygon_mask(outline: Points, width: int, height: int) -> Image.Image:
    """An antialiased 8-bit mask of the polygon, drawn large and reduced."""
    big = Image.new("L", (width * SUPERSAMPLE, height * SUPERSAMPLE), 0)
    ImageDraw.Draw(big).polygon([(x * SUPERSAMPLE, y * SUPERSAMPLE) for x, y in outline], fill=255)
    return big.resize((width, height), Image.Resampling.BOX)


def _contrasting(rng: np.random.Generator, under: NDArray[np.float32]) -> Rgb:
    for _ in range(100):
        colour = _colour(rng)
        if float(np.linalg.norm(np.array(colour, np.float32) - under)) >= LEAST_CONTRAST:
            return colour
    return (0, 0, 0) if float(under.mean()) > 127 else (255, 255, 255)


def _draw_target(
    rng: np.random.Generator, canvas: Image.Image, outline: Points, mask: Image.Image
) -> None:
    """Shadow first, then the fill (flat, gradient or outlined) through the mask."""
    area = np.asarray(mask) > 127
    under = np.asarray(canvas, dtype=np.float32)[area].mean(axis=0)
    if rng.uniform() < 0.3:
        offset = max(2, round(0.06 * math.sqrt(area.sum())))
        shadow = mask.transform(mask.size, Image.Transform.AFFINE, (1, 0, -offset, 0, 1, -offset))
        shadow = shadow.filter(ImageFilter.GaussianBlur(offset / 2)).point(lambda v: v * 0.5)
        canvas.paste((0, 0, 0), mask=shadow)
    first = _contrasting(rng, under)
    style = int(rng.integers(3))
    if style == 1:
        second = _contrasting(rng, under)
        canvas.paste(_gradient(canvas.size, outline, first, second, rng), mask=mask)
    else:
        canvas.paste(first, mask=mask)
    if style == 2:
        edge = _contrasting(rng, np.array(first, np.float32))
        thickness = max(2, round(rng.uniform(0.03, 0.08) * math.sqrt(area.sum())))
        ImageDraw.Draw(canvas).line(
            outline + outline[:1], fill=edge, width=thickness, joint="curve"
        )


def _gradient(
    size: tuple[int, int], outline: Points, first: Rgb, second: Rgb, rng: np.random.Generator
) -> Image.Image:
    """A linear two-colour ramp across the shape's extent, in a random direction."""
    xs, ys = np.meshgrid(np.arange(size[0], dtype=np.float32), np.arange(size[1], dtype=np.float32))
    angle = rng.uniform(0, 2 * math.pi)
    along = xs * math.cos(angle) + ys * math.sin(angle)
    ends = [x * math.cos(angle) + y * math.sin(angle) for x, y in outline]
    level = np.clip((along - min(ends)) / max(max(ends) - min(ends), 1.0), 0, 1)[..., None]
    blend = np.array(first, np.float32) * (1 - level) + np.array(second, np.float32) * level
    return Image.fromarray(np.round(blend).astype(np.uint8))


def _occlude(rng: np.random.Generator, canvas: Image.Image, outline: Points, radius: float) -> None:
    """Sometimes a leaf (an ellipse) or a strip of tape over one edge of the target."""
    if rng.uniform() >= 0.3:
        return
    draw = ImageDraw.Draw(canvas)
    x, y = outline[int(rng.integers(len(outline)))]
    r = radius * rng.uniform(0.15, 0.3)
    if rng.uniform() < 0.5:
        draw.ellipse((x - r, y - r / 2, x + r, y + r / 2), fill=_colour(rng))
    else:
        angle = rng.uniform(0, math.pi)
        dx, dy = math.cos(angle) * r * 1.5, math.sin(angle) * r * 1.5
        draw.line(
            [(x - dx, y - dy), (x + dx, y + dy)], fill=_colour(rng), width=max(2, round(r / 2))
        )


def _mask_box(mask: Image.Image) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = mask.getbbox() or (0, 0, mask.width, mask.height)
    return x0, y0, x1, y1
