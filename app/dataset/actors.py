"""What runs inside Ray: reading and decoding a batch of images (a task), and explaining one
(an actor holding one ``CamEngine``). Both take and give Arrow tables.

A file that cannot be read or decoded, and a batch the engine refuses, become rows with an
``error``: they never fail the job.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np
import pyarrow as pa
import torch

from app.dataset.explained import ExplainOptions, explain_pixels, with_model_defaults
from app.dataset.inputs import read_file
from app.dataset.rows import ImageInfo, RowOptions, error_row, explanation_rows, rows_table
from app.engine.engine import CamEngine
from app.engine.errors import CamserveError, ImageError
from app.engine.images.imaging import decode_image
from app.engine.models.manifest import ModelSpec
from app.engine.models.registry import load_model

__all__ = ["DECODED_SCHEMA", "EngineSetup", "Explainer", "decode_batch"]

DECODED_SCHEMA = pa.schema(
    [
        ("image_id", pa.string()),
        ("path", pa.string()),
        ("pixels", pa.large_binary()),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("error", pa.string()),
    ]
)
"""A decoded image: its (3, H, W) uint8 RGB pixels as bytes, or why it has none."""


def decode_batch(batch: pa.Table, max_pixels: int) -> pa.Table:
    """Read and decode each image of ``batch`` (columns ``image_id``, ``path``)."""
    rows: list[dict[str, Any]] = []
    for image_id, path in zip(
        batch.column("image_id").to_pylist(), batch.column("path").to_pylist(), strict=True
    ):
        row: dict[str, Any] = {"image_id": image_id, "path": path}
        try:
            decoded = decode_image(read_file(path), max_pixels=max_pixels)
        except FileNotFoundError:
            row["error"] = "no such file"
        except (ImageError, OSError) as error:
            row["error"] = str(error)
        else:
            row |= {
                "pixels": decoded.pixels.numpy().tobytes(),
                "width": decoded.width,
                "height": decoded.height,
            }
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=DECODED_SCHEMA)


@dataclass(frozen=True)
class EngineSetup:
    """What each actor builds its engine from."""

    spec: ModelSpec
    options: ExplainOptions
    rows: RowOptions
    device: str = "auto"
    torch_threads: int | None = None
    """Torch's intra-op threads in the actor (1 for an actor per CPU slot); ``None``: torch's
    default."""


class Explainer:
    """A Ray Data actor: one model, one engine, explaining batches of decoded images with the
    same pipeline as ``camserve explain``."""

    def __init__(self, setup: EngineSetup) -> None:
        if setup.torch_threads is not None:
            torch.set_num_threads(setup.torch_threads)
        loaded = load_model(setup.spec)
        self.engine = CamEngine.from_loaded(loaded, device=setup.device)
        self.options = with_model_defaults(setup.options, loaded)
        self.rows = setup.rows

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows: list[dict[str, Any]] = []
        decoded: list[tuple[ImageInfo, torch.Tensor]] = []
        described = batch.drop_columns(["pixels"]).to_pylist()
        for row, pixels in zip(described, batch.column("pixels"), strict=True):
            if row["error"] is not None:
                rows.append(error_row(row["image_id"], row["path"], row["error"]))
                continue
            info = ImageInfo(row["image_id"], row["path"], row["width"], row["height"])
            decoded.append((info, _image_tensor(pixels, info)))
        for chunk in _chunks(decoded, self.options.batch_size):
            rows += self._explain(chunk)
        return rows_table(rows)

    def _explain(self, chunk: list[tuple[ImageInfo, torch.Tensor]]) -> list[dict[str, Any]]:
        pixels = [image.to(self.engine.device) for _, image in chunk]
        try:
            explained = explain_pixels(self.engine, pixels, self.options)
        except CamserveError as error:
            return [error_row(info.image_id, info.path, str(error)) for info, _ in chunk]
        rows: list[dict[str, Any]] = []
        for (info, _), explanation in zip(chunk, explained, strict=True):
            rows += explanation_rows(info, explanation, self.rows)
        return rows


def _image_tensor(pixels: pa.Scalar[Any], info: ImageInfo) -> torch.Tensor:
    """The (3, H, W) uint8 image of a ``pixels`` cell, copied once out of Arrow's buffer (read
    only) into memory the engine owns."""
    flat = np.frombuffer(pixels.as_buffer(), dtype=np.uint8).copy()
    return torch.from_numpy(flat).reshape(3, info.height, info.width)


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk
