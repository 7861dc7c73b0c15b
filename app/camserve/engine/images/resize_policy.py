"""How a whole image becomes a model input of fixed size, and how a map comes back onto it.

Three policies, chosen per model in its manifest (``resize = "..."``):

* ``stretch``: the whole image is resized to the input size, whatever its aspect ratio.
* ``letterbox``: the image keeps its aspect ratio and is resized to fit inside the input, then
  centred; the margins are filled with the normalisation mean (0 after normalising).
* ``shorter-side``: the image keeps its aspect ratio and is resized so that it covers the input
  divided by ``CROP_FRACTION`` (torchvision's ImageNet convention: shorter side 256, centre crop
  224 for a 224 × 224 input), then the centre is cut out.

A ``Placement`` records where the resized image lies in the input frame, so that a map computed
on the input (at any resolution) can be sampled back at the centres of the original pixels:
``place_maps`` returns maps aligned to the whole original image, the padding left out, and zero
heat at the pixels whose centres fall outside a crop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F  # noqa: N812
from torch import Tensor

from camserve.engine.images.resize_policy_names import ResizePolicy

__all__ = [
    "CROP_FRACTION",
    "Placement",
    "PlacementOf",
    "ResizePolicy",
    "fit_to_input",
    "place_maps",
    "placement_for",
]

CROP_FRACTION = 0.875
"""The share of the resized image's shorter side that a ``shorter-side`` crop keeps."""


@dataclass(frozen=True)
class Placement:
    """An original image of ``image_size`` resized to ``resized`` with its top-left corner at
    ``offset`` (top, left) in the input frame of ``input_size``; all (height, width) pixels.
    A negative offset means the resized image is cropped; a positive one, padded."""

    image_size: tuple[int, int]
    input_size: tuple[int, int]
    resized: tuple[int, int]
    offset: tuple[int, int]

    @property
    def fills_frame(self) -> bool:
        """The resized image covers the input frame exactly: nothing padded, nothing cropped."""
        return self.resized == self.input_size and self.offset == (0, 0)


PlacementOf = Callable[[tuple[int, int]], Placement]
"""The placement of an image of a given (height, width) in one model's input."""


def placement_for(
    policy: ResizePolicy, image_size: tuple[int, int], input_size: tuple[int, int]
) -> Placement:
    """Where an image of ``image_size`` goes in an input of ``input_size`` under ``policy``."""
    height, width = image_size
    frame_height, frame_width = input_size
    if min(image_size) < 1 or min(input_size) < 1:
        raise ValueError(f"sizes must be positive, got {image_size} and {input_size}")
    if policy is ResizePolicy.STRETCH:
        return Placement(image_size, input_size, input_size, (0, 0))
    if policy is ResizePolicy.LETTERBOX:
        scale = min(frame_height / height, frame_width / width)
        resized = (_scaled(height, scale, frame_height), _scaled(width, scale, frame_width))
        offset = ((frame_height - resized[0]) // 2, (frame_width - resized[1]) // 2)
        return Placement(image_size, input_size, resized, offset)
    resized = _covering_size(image_size, input_size)
    # torchvision's CenterCrop: the crop starts at round((size - crop) / 2).
    offset = (
        -round((resized[0] - frame_height) / 2.0),
        -round((resized[1] - frame_width) / 2.0),
    )
    return Placement(image_size, input_size, resized, offset)


def _covering_size(image_size: tuple[int, int], input_size: tuple[int, int]) -> tuple[int, int]:
    """The resized size for ``shorter-side``: the axis that needs the larger scale to cover the
    input gets ``round(input / CROP_FRACTION)`` pixels, the other keeps the aspect ratio
    (truncated, as torchvision's ``Resize(int)`` does: 224 → shorter side 256)."""
    height, width = image_size
    frame_height, frame_width = input_size
    if frame_height / height >= frame_width / width:
        new_height = round(frame_height / CROP_FRACTION)
        return new_height, max(int(new_height * width / height), frame_width)
    new_width = round(frame_width / CROP_FRACTION)
    return max(int(new_width * height / width), frame_height), new_width


def _scaled(length: int, scale: float, limit: int) -> int:
    return min(max(round(length * scale), 1), limit)


def fit_to_input(
    images: Tensor, placement: Placement, fill: Tensor, mode: str = "bilinear"
) -> Tensor:
    """Images (N, C, H, W) float, all of ``placement.image_size``, as (N, C, h, w) model input.

    Resizing is ``mode`` (bilinear or bicubic, as the model's source asks) with antialiasing
    (``align_corners=False``); ``fill`` (C,) fills the margins a letterbox leaves.
    """
    resized = F.interpolate(
        images, size=placement.resized, mode=mode, align_corners=False, antialias=True
    )
    if placement.fills_frame:
        return resized
    frame_height, frame_width = placement.input_size
    frame = fill.view(1, -1, 1, 1).expand(images.shape[0], -1, frame_height, frame_width)
    frame = frame.to(resized.dtype).clone()
    source, target = _overlap(placement)
    frame[..., target[0], target[1]] = resized[..., source[0], source[1]]
    return frame


def _overlap(placement: Placement) -> tuple[tuple[slice, slice], tuple[slice, slice]]:
    """The rows and columns shared by the resized image and the frame: (in the resized image,
    in the frame)."""
    spans = [
        _span(offset, resized, frame)
        for offset, resized, frame in zip(
            placement.offset, placement.resized, placement.input_size, strict=True
        )
    ]
    return (spans[0][0], spans[1][0]), (spans[0][1], spans[1][1])


def _span(offset: int, resized: int, frame: int) -> tuple[slice, slice]:
    start = max(offset, 0)
    stop = min(offset + resized, frame)
    return slice(start - offset, stop - offset), slice(start, stop)


def place_maps(maps: Tensor, placement: Placement) -> Tensor:
    """Maps (N, K, h, w) over the input frame, sampled at the original image's pixel centres.

    Returns (N, K, H, W) for ``placement.image_size``: bilinear with the half-pixel convention
    (for ``stretch`` what ``F.interpolate(..., align_corners=False)`` gives, to float rounding),
    padding left out, and zero where a pixel's centre falls outside the frame (cropped away by
    ``shorter-side``). Computed as two small matrix products, (H, h) · map · (w, W): on a CPU
    several times faster than ``F.interpolate`` (docs/benchmarks.md, "How seven methods came
    under 1.5×").
    """
    rows = _sampling_matrix(placement, 0, int(maps.shape[-2]), maps.device, maps.dtype)
    cols = _sampling_matrix(placement, 1, int(maps.shape[-1]), maps.device, maps.dtype)
    return rows @ maps @ cols.transpose(0, 1)


@lru_cache(maxsize=64)
def _sampling_matrix(
    placement: Placement, axis: int, map_length: int, device: torch.device, dtype: torch.dtype
) -> Tensor:
    """(image length, map length) weights of linear interpolation along one axis (cached: an
    image size comes back with every upload of the same camera; callers never write to it).

    Original pixel ``u`` has its centre at ``(u + 0.5) · resized / image`` in the resized image,
    ``offset`` more in the frame, and at ``frame_position · map / frame − 0.5`` in map cells;
    positions beyond the first and last cell centres take the edge cell (as ``F.interpolate``
    does). Rows of pixels outside the frame stay zero.
    """
    length = placement.image_size[axis]
    resized, offset = placement.resized[axis], placement.offset[axis]
    frame = placement.input_size[axis]
    centres = (torch.arange(length, dtype=torch.float64) + 0.5) * (resized / length) + offset
    inside = (centres >= 0) & (centres < frame)
    cells = (centres * (map_length / frame) - 0.5).clamp(0, map_length - 1)
    low = cells.floor().long()
    high = (low + 1).clamp(max=map_length - 1)
    upper_weight = cells - low
    weights = torch.zeros((length, map_length), dtype=torch.float64)
    index = torch.arange(length)
    weights[index, low] += 1 - upper_weight
    weights[index, high] += upper_weight
    weights[~inside] = 0
    return weights.to(device=device, dtype=dtype)
