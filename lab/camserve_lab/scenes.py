"""Generated scenes with known answers: one target shape per image, its class and its box.

A scene is drawn from ``SceneSettings``: an image of random size and aspect ratio, a textured
background, clutter (strokes of varied width and count, specks), a few distractor shapes that
belong to no class (ellipses, rings, bars, crescents), and one filled target shape of random
class, position, scale, colour and rotation, drawn last and largest. Two settings are defined:
``TRAINING_SCENES`` and ``HELD_OUT_SCENES``; they share no background texture and no colour
(hues alternate between 30° bands), and differ in their size, clutter and distractor ranges.
Scene ``i`` of seed ``s`` and settings ``c`` is always the same image, on every machine, in any
order.
"""

from __future__ import annotations

import colorsys
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import cv2
import numpy as np
from numpy.typing import NDArray

from camserve_lab.target_styles import FILLS, paint, paint_target
from camserve_lab.textures import TEXTURE_PAINTERS

__all__ = [
    "DEFAULT_SIZE",
    "HELD_OUT_SCENES",
    "SHAPES",
    "TEXTURES",
    "TRAINING_SCENES",
    "Box",
    "Scene",
    "SceneSettings",
    "generate_scene",
    "scene_at",
    "scenes",
    "square_settings",
]

SHAPES = ("circle", "square", "triangle", "star", "cross")
DISTRACTORS = ("ellipse", "ring", "bar", "crescent")
TEXTURES = (
    "blotches", "stripes", "flat", "waves", "gradient", "checks", "noise", "cells", "marble",
    "photo",
)  # fmt: skip
DEFAULT_SIZE = 128
"""The demo model's input size (height = width)."""
MIN_CONTRAST = 90.0
"""Least distance (in RGB units) between the target's colour and the background under it."""
HUE_BAND = 30.0

Box = tuple[int, int, int, int]
"""(x0, y0, x1, y1) in pixels; x1 and y1 are exclusive."""
Range = tuple[float, float]


@dataclass(frozen=True)
class SceneSettings:
    """The distribution scenes are drawn from; every range is inclusive."""

    long_side: tuple[int, int] = (64, 2000)
    """Pixels of the image's longer side (drawn log-uniformly)."""
    aspect: Range = (0.25, 4.0)
    """Width / height (drawn log-uniformly)."""
    min_short_side: int = 32
    draw_limit: int | None = None
    """Draw larger images at this longer side instead, strokes and grain scaled down with them,
    as a resize would leave them (makes training data cheap; ``None``: draw at full size)."""
    target_radius: Range = (0.2, 0.45)
    """The target's radius as a fraction of the shorter side."""
    strokes: tuple[int, int] = (0, 40)
    stroke_width: Range = (0.6, 8.0)
    """Stroke widths in pixels of a 512-pixel image, scaled with the image."""
    specks: tuple[int, int] = (0, 20)
    distractors: tuple[int, int] = (0, 3)
    textures: tuple[str, ...] = ("blotches", "stripes", "flat", "waves")
    hue_parity: int = 0
    """Colours take hues from the even (0) or odd (1) 30° bands of the colour wheel."""
    grain: Range = (0.0, 16.0)
    fills: tuple[str, ...] = ("flat",)
    """How the target is painted (``target_styles.FILLS``): flat, gradient, outlined."""
    occlusion: float = 0.0
    """The chance that a small blob is drawn over the target's edge, after it."""
    star_depth: Range = (0.42, 0.42)
    """A star's inner radius as a fraction of its outer radius."""
    cross_arm: Range = (0.4, 0.4)
    """A cross's arm half-width as a fraction of its radius."""
    min_contrast: float = MIN_CONTRAST
    """Least distance (in RGB units) between the target's colour and the background under it."""

    def __post_init__(self) -> None:
        unknown = set(self.textures) - set(TEXTURES)
        if unknown or not self.textures:
            raise ValueError(f"textures must be among {TEXTURES}, got {self.textures}")
        if set(self.fills) - set(FILLS) or not self.fills:
            raise ValueError(f"fills must be among {FILLS}, got {self.fills}")
        if not 1 <= self.min_short_side <= self.long_side[0] <= self.long_side[1]:
            raise ValueError("need 1 <= min_short_side <= long_side[0] <= long_side[1]")


TRAINING_SCENES = SceneSettings(
    draw_limit=160,
    textures=("blotches", "stripes", "flat", "waves", "noise", "cells", "marble"),
    fills=FILLS,
    occlusion=0.25,
    star_depth=(0.34, 0.55),
    cross_arm=(0.25, 0.48),
)
HELD_OUT_SCENES = SceneSettings(
    long_side=(64, 2000),
    aspect=(0.3, 3.5),
    target_radius=(0.22, 0.42),
    strokes=(0, 30),
    stroke_width=(0.8, 6.0),
    specks=(0, 30),
    distractors=(0, 2),
    textures=("gradient", "checks"),
    hue_parity=1,
    grain=(0.0, 12.0),
)


def square_settings(size: int, base: SceneSettings = TRAINING_SCENES) -> SceneSettings:
    """``base`` with every image ``size`` × ``size`` pixels, drawn at full size."""
    return replace(base, long_side=(size, size), aspect=(1.0, 1.0), min_short_side=size,
                   draw_limit=None)  # fmt: skip


@dataclass(frozen=True)
class Scene:
    image: NDArray[np.uint8]
    """(H, W, 3) RGB."""
    label: int
    """Index into ``SHAPES``."""
    box: Box
    """The target shape's tight bounding box."""

    @property
    def label_name(self) -> str:
        return SHAPES[self.label]


def scene_at(seed: int, index: int, settings: SceneSettings = TRAINING_SCENES) -> Scene:
    """Scene ``index`` of the set drawn with ``seed`` and ``settings``."""
    return generate_scene(np.random.default_rng([seed, index]), settings)


def scenes(seed: int, count: int, settings: SceneSettings = TRAINING_SCENES) -> Iterator[Scene]:
    """The first ``count`` scenes of ``seed`` and ``settings``."""
    for index in range(count):
        yield scene_at(seed, index, settings)


def generate_scene(rng: np.random.Generator, settings: SceneSettings = TRAINING_SCENES) -> Scene:
    """One random scene drawn from ``settings``."""
    width, height, scale = _canvas(rng, settings)
    painter = _Painter(rng, settings, scale)
    image = painter.background(width, height)
    painter.clutter(image)
    short_side = min(width, height)
    radius = min(rng.uniform(*settings.target_radius) * short_side, (short_side / 2 - 1) / 1.05)
    painter.distractors(image, radius)
    label = int(rng.integers(len(SHAPES)))
    mask = _shape_mask(SHAPES[label], rng, radius, width, height, settings=settings)
    painter.target(image, mask)
    painter.occlude(image, mask, radius)
    return Scene(image=image, label=label, box=_tight_box(mask))


def _canvas(rng: np.random.Generator, settings: SceneSettings) -> tuple[int, int, float]:
    """Width, height and the drawing scale (drawn pixels per pixel of the described image)."""
    long_side = _log_uniform(rng, *settings.long_side)
    aspect = _log_uniform(rng, *settings.aspect)
    short_side = max(long_side / max(aspect, 1 / aspect), settings.min_short_side)
    width, height = (long_side, short_side) if aspect >= 1 else (short_side, long_side)
    scale = 1.0
    if settings.draw_limit is not None and long_side > settings.draw_limit:
        scale = settings.draw_limit / long_side
    return max(round(width * scale), 1), max(round(height * scale), 1), scale


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


class _Painter:
    """Draws backgrounds, clutter and distractors in the settings' colours."""

    def __init__(self, rng: np.random.Generator, settings: SceneSettings, scale: float) -> None:
        self.rng, self.settings, self.scale = rng, settings, scale

    def colour(self) -> NDArray[np.float32]:
        """A random RGB colour whose hue lies in the settings' bands (greys count for both)."""
        rng = self.rng
        band = int(rng.integers(6)) * 2 + self.settings.hue_parity
        hue = (band + rng.uniform(0, 1)) * HUE_BAND
        saturation = rng.uniform(0.35, 1.0) if rng.uniform() < 0.9 else 0.0
        value = rng.uniform(0.1, 1.0)
        rgb = colorsys.hsv_to_rgb(hue / 360, saturation, value)
        return np.array(rgb, np.float32) * 255

    def colour_tuple(self) -> tuple[int, int, int]:
        red, green, blue = (round(float(c)) for c in self.colour())
        return red, green, blue

    def background(self, width: int, height: int) -> NDArray[np.uint8]:
        kind = self.settings.textures[int(self.rng.integers(len(self.settings.textures)))]
        texture = TEXTURE_PAINTERS[kind](self, width, height)
        sigma = self.rng.uniform(*self.settings.grain) * math.sqrt(self.scale)
        if sigma > 0:
            texture += self.rng.standard_normal(texture.shape, np.float32) * np.float32(sigma)
        return np.ascontiguousarray(np.clip(texture, 0, 255).round().astype(np.uint8))

    def clutter(self, image: NDArray[np.uint8]) -> None:
        """Strokes (open polylines, many across the whole image) and specks, behind the target.

        Strokes under a pixel wide are drawn one pixel wide on a copy that is blended in once,
        faded, as a downscale would leave them."""
        height, width = image.shape[:2]
        size_factor = max(width, height) / 512
        low, high = self.settings.strokes
        strokes = []
        for _ in range(int(self.rng.integers(low, high + 1))):
            count = int(self.rng.integers(2, 6))
            points = self.rng.uniform(-0.1, 1.1, (count, 2)) * (width, height)
            thickness = self.rng.uniform(*self.settings.stroke_width) * size_factor
            strokes.append((np.round(points).astype(np.int32).reshape(-1, 1, 2), thickness))
        faint = [(points, 1.0) for points, thickness in strokes if thickness < 1]
        if faint:
            layer = image.copy()
            self._draw_strokes(layer, faint)
            opacity = float(self.rng.uniform(0.3, 1.0))
            cv2.addWeighted(layer, opacity, image, 1 - opacity, 0, dst=image)
        self._draw_strokes(image, [stroke for stroke in strokes if stroke[1] >= 1])
        low, high = self.settings.specks
        for _ in range(int(self.rng.integers(low, high + 1))):
            centre = (int(self.rng.integers(width)), int(self.rng.integers(height)))
            radius = max(1, round(self.rng.uniform(1, 4) * size_factor))
            cv2.circle(image, centre, radius, self.colour_tuple(), -1, cv2.LINE_AA)

    def _draw_strokes(
        self, image: NDArray[np.uint8], strokes: Sequence[tuple[NDArray[np.int32], float]]
    ) -> None:
        for points, thickness in strokes:
            colour = self.colour_tuple()
            cv2.polylines(image, [points], False, colour, round(thickness), cv2.LINE_AA)

    def distractors(self, image: NDArray[np.uint8], target_radius: float) -> None:
        """Shapes of no class, each smaller than the target."""
        low, high = self.settings.distractors
        height, width = image.shape[:2]
        for _ in range(int(self.rng.integers(low, high + 1))):
            kind = DISTRACTORS[int(self.rng.integers(len(DISTRACTORS)))]
            radius = target_radius * self.rng.uniform(0.35, 0.8)
            mask = _distractor_mask(kind, self.rng, radius, width, height)
            paint(image, mask, self.colour())

    def target(self, image: NDArray[np.uint8], mask: NDArray[np.uint8]) -> None:
        """The target in a colour that stands out, painted in one of the settings' fills."""
        colour = self.contrasting_colour(image, mask)
        fills = self.settings.fills
        if fills == ("flat",):
            paint(image, mask, colour)  # no draw from the generator: the same scenes as before
            return
        fill = fills[int(self.rng.integers(len(fills)))]
        second = self.contrasting_colour(image, mask) if fill != "flat" else colour
        paint_target(image, mask, fill, (colour, second), self.rng)

    def occlude(self, image: NDArray[np.uint8], mask: NDArray[np.uint8], radius: float) -> None:
        """With the settings' chance, an ellipse of another colour over a point of the target's
        edge (the target's box stays that of the whole shape)."""
        if self.settings.occlusion <= 0 or self.rng.uniform() >= self.settings.occlusion:
            return
        edge = np.argwhere(cv2.subtract(mask, cv2.erode(mask, np.ones((3, 3), np.uint8))) > 0)
        row, column = edge[int(self.rng.integers(len(edge)))]
        size = radius * self.rng.uniform(0.15, 0.35)
        axes = (max(1, round(size)), max(1, round(size * self.rng.uniform(0.3, 1.0))))
        angle = float(self.rng.uniform(0, 360))
        blob = np.zeros_like(mask)
        cv2.ellipse(blob, (int(column), int(row)), axes, angle, 0, 360, 255, -1, cv2.LINE_AA)
        paint(image, blob, self.colour())

    def contrasting_colour(
        self, image: NDArray[np.uint8], mask: NDArray[np.uint8]
    ) -> NDArray[np.float32]:
        """A colour at least the settings' ``min_contrast`` away from the mean background under
        the mask."""
        under = image[mask > 0].astype(np.float32).mean(axis=0)
        for _ in range(200):
            colour = self.colour()
            if float(np.linalg.norm(colour - under)) >= self.settings.min_contrast:
                return colour
        return np.where(under > 127, 0.0, 255.0).astype(np.float32)  # pragma: no cover


def _shape_mask(
    shape: str,
    rng: np.random.Generator,
    radius: float,
    width: int,
    height: int,
    *,
    settings: SceneSettings = TRAINING_SCENES,
) -> NDArray[np.uint8]:
    """A 0/255 mask of one ``shape`` with random rotation, position and (for stars and
    crosses, as the settings allow) proportions, fully inside."""
    centre = _centre_inside(rng, radius, width, height)
    angle = rng.uniform(0, 2 * np.pi)
    proportion = {"star": settings.star_depth, "cross": settings.cross_arm}.get(shape)
    if proportion is not None and proportion[0] != proportion[1]:
        proportion = (rng.uniform(*proportion),) * 2
    mask = np.zeros((height, width), np.uint8)
    if shape == "circle":
        cv2.circle(mask, _rounded(centre), round(radius), 255, -1, cv2.LINE_AA)
    else:
        depth = proportion[0] if proportion is not None else 0.0
        outline = _outline(shape, radius, angle, depth) + centre
        cv2.fillPoly(mask, [np.round(outline).astype(np.int32)], 255, cv2.LINE_AA)
    return mask


def _centre_inside(
    rng: np.random.Generator, radius: float, width: int, height: int
) -> NDArray[np.float64]:
    margin = radius * 1.05 + 1
    return np.array(
        [
            rng.uniform(margin, max(margin, width - margin)),
            rng.uniform(margin, max(margin, height - margin)),
        ]
    )


def _distractor_mask(
    kind: str, rng: np.random.Generator, radius: float, width: int, height: int
) -> NDArray[np.uint8]:
    """A 0/255 mask of a shape of no class, anywhere (it may leave the image)."""
    centre = _rounded(rng.uniform(0, 1, 2) * (width, height))
    degrees = float(rng.uniform(0, 360))
    mask = np.zeros((height, width), np.uint8)
    line = cv2.LINE_AA
    if kind == "ellipse":
        axes = (round(radius), max(1, round(radius / rng.uniform(2.0, 3.5))))
        cv2.ellipse(mask, centre, axes, degrees, 0, 360, 255, -1, line)
    elif kind == "ring":
        thickness = max(1, round(radius * rng.uniform(0.12, 0.25)))
        cv2.circle(mask, centre, round(radius), 255, thickness, line)
    elif kind == "bar":
        length, breadth = 2 * radius, 2 * radius / rng.uniform(3.0, 6.0)
        corners = cv2.boxPoints((centre, (length, breadth), degrees))
        cv2.fillPoly(mask, [np.round(corners).astype(np.int32)], 255, line)
    else:  # crescent: a disc with an offset disc cut out of it
        cv2.circle(mask, centre, round(radius), 255, -1, line)
        shift, turn = radius * 0.45, degrees  # the bite's direction, read as radians
        bite = (
            round(centre[0] + shift * math.cos(turn)),
            round(centre[1] + shift * math.sin(turn)),
        )
        cv2.circle(mask, bite, round(radius * 0.9), 0, -1, line)
    return mask


def _outline(shape: str, radius: float, angle: float, depth: float) -> NDArray[np.float64]:
    """Polygon vertices (N, 2) around the origin, rotated by ``angle``; ``depth`` is a star's
    inner radius or a cross's arm half-width, as a fraction of ``radius``."""
    angles: NDArray[np.float64]
    radii: NDArray[np.float64]
    if shape == "square":
        angles = np.pi / 4 + np.arange(4) * np.pi / 2
        radii = np.full(4, radius)
    elif shape == "triangle":
        angles = np.arange(3) * 2 * np.pi / 3
        radii = np.full(3, radius)
    elif shape == "star":
        angles = np.arange(10) * np.pi / 5
        radii = np.where(np.arange(10) % 2 == 0, radius, radius * depth)
    else:  # cross: a plus sign
        half = radius * depth
        corners = [(half, radius), (half, half), (radius, half), (radius, -half), (half, -half),
                   (half, -radius), (-half, -radius), (-half, -half), (-radius, -half),
                   (-radius, half), (-half, half), (-half, radius)]  # fmt: skip
        points = np.array(corners, dtype=np.float64)
        angles = np.arctan2(points[:, 1], points[:, 0])
        radii = np.hypot(points[:, 0], points[:, 1])
    turned = angles + angle
    return np.stack([radii * np.cos(turned), radii * np.sin(turned)], axis=1)


def _rounded(point: NDArray[np.float64]) -> tuple[int, int]:
    return round(float(point[0])), round(float(point[1]))


def _tight_box(mask: NDArray[np.uint8]) -> Box:
    rows = np.flatnonzero(mask.max(axis=1))
    cols = np.flatnonzero(mask.max(axis=0))
    return int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1
