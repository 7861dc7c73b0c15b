"""Noisy linear imputation (ROAD, Rong et al., ICML 2022): each removed pixel takes the weighted
mean of its neighbours inside the image (1/6 for the four beside it, 1/12 for the four diagonal),
solved jointly over all removed pixels of an image, plus a little Gaussian noise.

pytorch-grad-cam's ``NoisyLinearImputer`` (the ROAD authors' code) sets the sparse system up
entry by entry in a ``lil_matrix``; here it is built in a few vectorised steps and solved by the
same sparse direct solver (SuperLU), with the same result to float32 precision
(``tests/quality/audit/test_road.py``). The setup then costs little next to the solve, which
grows with the share of pixels removed
(docs/benchmarks.md#measurements-behind-smaller-choices-in-the-code).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import torch
from scipy.sparse import coo_matrix
from scipy.sparse.linalg import spsolve
from torch import Tensor

__all__ = ["DEFAULT_NOISE", "impute"]

DEFAULT_NOISE = 0.01
"""The standard deviation of the noise added to imputed pixels (the ROAD authors' default)."""

_NEIGHBOURS: tuple[tuple[int, int, float], ...] = (
    (1, 1, 1 / 12),
    (0, 1, 1 / 6),
    (-1, 1, 1 / 12),
    (1, -1, 1 / 12),
    (0, -1, 1 / 6),
    (-1, -1, 1 / 12),
    (1, 0, 1 / 6),
    (-1, 0, 1 / 6),
)
"""(row offset, column offset, weight) of each neighbour, in the order the ROAD code sums them."""


def impute(
    image: Tensor,
    removed: Tensor,
    *,
    noise: float = DEFAULT_NOISE,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``image`` (C, H, W) with the pixels where ``removed`` (H, W) is true imputed, on the CPU.

    The noise is drawn as pytorch-grad-cam draws it, one (C, removed pixels) draw in raster
    order, so a run seeded alike adds the same noise. A mask that removes every pixel (a flat
    map's) leaves nothing to impute from: those images become 0, the dataset's mean colour once
    normalised (pytorch-grad-cam's solve fails there)."""
    if image.ndim != 3 or tuple(removed.shape) != tuple(image.shape[1:]):
        raise ValueError(
            f"need an image (C, H, W) and a mask (H, W), got {tuple(image.shape)} and "
            f"{tuple(removed.shape)}"
        )
    values = image.detach().to("cpu", torch.float32)
    holes = removed.detach().to("cpu", torch.bool).numpy()
    flat = values.reshape(values.shape[0], -1).clone()
    if not holes.any():
        return flat.reshape(values.shape)
    if holes.all():
        solution = torch.zeros_like(flat)
    else:
        solution = torch.tensor(_solve(values.numpy(), holes), dtype=torch.float32).t()
    if noise > 0.0:
        solution = solution + noise * torch.randn(solution.shape, generator=generator)
    flat[:, torch.from_numpy(holes.reshape(-1))] = solution
    return flat.reshape(values.shape)


def _solve(image: npt.NDArray[np.float32], holes: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """The imputed values (removed pixels, C) in raster order: each is the weighted mean of its
    neighbours inside the image, known or imputed."""
    height, width = holes.shape
    pixels = image.reshape(image.shape[0], -1)
    unknown = np.flatnonzero(holes.reshape(-1))
    variable = np.full(height * width, -1, dtype=np.int64)
    variable[unknown] = np.arange(unknown.size)
    rows, columns = np.divmod(unknown, width)
    weight_inside = np.zeros(unknown.size)
    right_side = np.zeros((unknown.size, image.shape[0]))
    entries: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], float]] = []
    for row_offset, column_offset, weight in _NEIGHBOURS:
        row, column = rows + row_offset, columns + column_offset
        inside = (row >= 0) & (row < height) & (column >= 0) & (column < width)
        weight_inside[inside] += weight
        equation = np.flatnonzero(inside)
        neighbour = row[inside] * width + column[inside]
        imputed = variable[neighbour] >= 0
        entries.append((equation[imputed], variable[neighbour[imputed]], weight))
        right_side[equation[~imputed]] -= weight * pixels[:, neighbour[~imputed]].T
    diagonal = np.arange(unknown.size)
    matrix_rows = np.concatenate([diagonal, *(equation for equation, _, _ in entries)])
    matrix_columns = np.concatenate([diagonal, *(column for _, column, _ in entries)])
    matrix_values = np.concatenate(
        [-weight_inside, *(np.full(column.size, weight) for _, column, weight in entries)]
    )
    system = coo_matrix((matrix_values, (matrix_rows, matrix_columns)), shape=(unknown.size,) * 2)
    solution = spsolve(system.tocsc(), right_side)
    return np.asarray(solution, dtype=np.float64).reshape(unknown.size, image.shape[0])
