"""What runs inside Ray: an actor holding one ``CamEngine`` that reads, decodes and explains a
batch of images (columns ``image_id``, ``path``) and writes their rows as one Parquet file of
the output; it gives back only each image's id and error (null where it was explained).

Where the actor holds a CPU for it (``camserve.dataset.actor_pool``), the files are read and decoded
in a small thread pool of the actor's own, a few images ahead of the engine (``READ_AHEAD``, so
that a batch of large photos never sits decoded in memory at once), so that decoding overlaps
the forward and backward passes (Pillow and zlib release the GIL while they work, as torch
does); otherwise the actor's own thread decodes each image before explaining it. No raw
pixels travel through Ray's object store and no separate task decodes or writes (each one a
Ray worker process to start, waiting for a CPU that the actors hold): an actor takes paths and
writes rows. A file that cannot be read or decoded, and a batch the engine refuses, become rows
with an ``error``: they never fail the job.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Any

import pyarrow as pa
import torch

from camserve.dataset.actor_pool import PoolPlan
from camserve.dataset.explained import ExplainOptions
from camserve.dataset.inputs import read_file
from camserve.dataset.job_spec import DatasetJob
from camserve.dataset.model_explainer import load_explainer
from camserve.dataset.output_files import write_rows
from camserve.dataset.rows import ImageInfo, RowOptions, error_row, explanation_rows, rows_table
from camserve.engine.errors import CamserveError, ImageError
from camserve.engine.images.imaging import DecodedImage, decode_image
from camserve.engine.models.manifest import ModelSpec

__all__ = ["WRITTEN_SCHEMA", "EngineSetup", "Explainer", "load_image"]

WRITTEN_SCHEMA = pa.schema(
    [("image_id", pa.string()), ("error", pa.string()), ("rows", pa.int32())]
)
"""What an actor gives back per image: its id, why it failed (null where it did not), and how
many rows it wrote for it."""
READ_AHEAD = 8
"""Images read and decoded ahead of the one the engine takes next, at most."""


@dataclass(frozen=True)
class EngineSetup:
    """What each actor builds its engine from."""

    spec: ModelSpec
    options: ExplainOptions
    rows: RowOptions
    output: str
    """The output folder (existing; local path or URI) the rows are written to."""
    device: str = "auto"
    torch_threads: int | None = None
    """Torch's intra-op threads in the actor (1 for an actor per CPU slot); ``None``: torch's
    default."""
    reader_threads: int = 0
    """Threads that read and decode ahead of the engine; 0: the actor's own thread does, one
    image at a time. ``camserve.dataset.actor_pool`` decides, by the CPUs the actor holds."""

    @classmethod
    def of(cls, job: DatasetJob, plan: PoolPlan) -> EngineSetup:
        """The setup of ``job``'s engines, on the device and threads ``plan`` chose."""
        return cls(
            spec=job.spec,
            options=job.options,
            rows=job.rows,
            output=job.output,
            device=plan.device,
            torch_threads=plan.torch_threads,
            reader_threads=plan.reader_threads,
        )


def load_image(path: str, max_pixels: int) -> DecodedImage | str:
    """The decoded image at ``path``, or why it cannot be had."""
    try:
        return decode_image(read_file(path), max_pixels=max_pixels)
    except FileNotFoundError:
        return "no such file"
    except (ImageError, OSError) as error:
        return str(error)


class Explainer:
    """A Ray Data actor: one model (a classifier, explained with the same pipeline as
    ``camserve explain``, or a detector), explaining batches of images."""

    def __init__(self, setup: EngineSetup, on_images: Callable[[int], None] | None = None) -> None:
        """``on_images``: told how many more images are done after each engine call (in this
        process only: an actor inside Ray has none)."""
        self.on_images = on_images
        if setup.torch_threads is not None:
            torch.set_num_threads(setup.torch_threads)
        self.model = load_explainer(setup.spec, setup.options, setup.device)
        self.options = self.model.options
        self.rows = setup.rows
        self.output = setup.output
        self.readers = (
            ThreadPoolExecutor(setup.reader_threads, thread_name_prefix="read")
            if setup.reader_threads > 0
            else None
        )

    def __call__(self, batch: pa.Table) -> pa.Table:
        images = zip(
            batch.column("image_id").to_pylist(), batch.column("path").to_pylist(), strict=True
        )
        rows: list[dict[str, Any]] = []
        reported = 0
        for chunk in self._decoded_chunks(images, rows):
            rows += self._explain(chunk)
            reported = self._report(rows, reported)
        self._report(rows, reported)
        write_rows(self.output, rows_table(rows))
        errors = {row["image_id"]: row.get("error") for row in rows}
        counts = Counter(row["image_id"] for row in rows)
        return pa.Table.from_pydict(
            {
                "image_id": list(errors),
                "error": list(errors.values()),
                "rows": [counts[image_id] for image_id in errors],
            },
            schema=WRITTEN_SCHEMA,
        )

    def close(self) -> None:
        """Let the reader threads go (an actor's end with its process; one in this process
        ends here)."""
        if self.readers is not None:
            self.readers.shutdown()

    def _report(self, rows: list[dict[str, Any]], reported: int) -> int:
        """Tell ``on_images`` of the images in ``rows`` beyond the ``reported`` first ones;
        how many are reported now."""
        if self.on_images is None:
            return reported
        handled = len({row["image_id"] for row in rows})
        if handled > reported:
            self.on_images(handled - reported)
        return handled

    def _decoded_chunks(
        self, images: Iterator[tuple[str, str]], errors: list[dict[str, Any]]
    ) -> Iterator[list[tuple[ImageInfo, torch.Tensor]]]:
        """The batch's decoded images, ``options.batch_size`` at a time, in order; the readers
        stay ``READ_AHEAD`` images ahead, so that the next ones decode while the engine works.
        Images that cannot be decoded go to ``errors`` as error rows."""
        ahead = self.options.batch_size + (READ_AHEAD if self.readers is not None else 0)
        loads: deque[tuple[str, str, Future[DecodedImage | str]]] = deque()
        chunk: list[tuple[ImageInfo, torch.Tensor]] = []
        while True:
            for image_id, path in islice(images, ahead - len(loads)):
                loads.append((image_id, path, self._load(path)))
            if not loads:
                break
            image_id, path, load = loads.popleft()
            image = load.result()
            if isinstance(image, str):
                errors.append(error_row(image_id, path, image))
                continue
            chunk.append((ImageInfo(image_id, path, image.width, image.height), image.pixels))
            if len(chunk) == self.options.batch_size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    def _load(self, path: str) -> Future[DecodedImage | str]:
        if self.readers is not None:
            return self.readers.submit(load_image, path, self.options.max_pixels)
        done: Future[DecodedImage | str] = Future()
        done.set_result(load_image(path, self.options.max_pixels))
        return done

    def _explain(self, chunk: list[tuple[ImageInfo, torch.Tensor]]) -> list[dict[str, Any]]:
        pixels = [image.to(self.model.device) for _, image in chunk]
        try:
            explained = self.model.explain(pixels, self.options)
        except CamserveError as error:
            return [error_row(info.image_id, info.path, str(error)) for info, _ in chunk]
        rows: list[dict[str, Any]] = []
        for (info, _), explanation in zip(chunk, explained, strict=True):
            rows += explanation_rows(info, explanation, self.rows)
        return rows
