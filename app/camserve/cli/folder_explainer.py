"""Explain files and folders from the command line: find images, batch them, write results.

Bad files are reported and skipped; one unreadable image never aborts a run. Every output name
carries the method and the explained class's label (``<stem>_<method>_<label>_overlay.png``),
so runs with other methods or classes never overwrite each other.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from camserve.dataset.explained import ExplainOptions, explain_pixels
from camserve.engine.engine import CamEngine
from camserve.engine.errors import ImageError
from camserve.engine.images.image_files import InputFile
from camserve.engine.images.imaging import DecodedImage, decode_image, encode_image

__all__ = ["ExplainOptions", "FileResult", "explain_files", "file_name_part", "write_summary"]


UNSAFE_IN_NAMES = re.compile(r"[^A-Za-z0-9._+-]+")


@dataclass
class FileResult:
    """One input file's outcome: its outputs and predictions, or the reason it was skipped."""

    source: str
    outputs: list[str] = field(default_factory=list)
    classes: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    method: str = ""
    """The methods, comma-separated."""
    layer: str = ""
    error: str = ""


def explain_files(
    engine: CamEngine,
    files: Sequence[InputFile],
    output_dir: Path,
    options: ExplainOptions,
    on_done: Callable[[FileResult], None] = lambda _result: None,
) -> list[FileResult]:
    """Explain ``files`` in batches through ``engine``, writing images under ``output_dir``."""
    results: list[FileResult] = []
    for chunk in _chunks(files, options.batch_size):
        for result in _explain_chunk(engine, chunk, output_dir, options):
            results.append(result)
            on_done(result)
    return results


def _chunks(files: Sequence[InputFile], size: int) -> Iterator[list[InputFile]]:
    iterator = iter(files)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _explain_chunk(
    engine: CamEngine, chunk: list[InputFile], output_dir: Path, options: ExplainOptions
) -> list[FileResult]:
    decoded: list[tuple[InputFile, DecodedImage]] = []
    results: dict[Path, FileResult] = {}
    for item in chunk:
        try:
            decoded.append(
                (item, decode_image(item.path.read_bytes(), max_pixels=options.max_pixels))
            )
        except FileNotFoundError:
            results[item.path] = FileResult(str(item.path), error="no such file")
        except (ImageError, OSError) as error:
            results[item.path] = FileResult(str(item.path), error=str(error))
    if decoded:
        _explain_decoded(engine, decoded, output_dir=output_dir, options=options, results=results)
    return [results[item.path] for item in chunk]


def _explain_decoded(
    engine: CamEngine,
    decoded: list[tuple[InputFile, DecodedImage]],
    *,
    output_dir: Path,
    options: ExplainOptions,
    results: dict[Path, FileResult],
) -> None:
    """One engine call for every method over the decoded images (one forward and one backward
    pass, ``explain_pixels``); their outputs added to ``results``. A class-agnostic method
    (Eigen-CAM) writes one file per image, named "all-classes"."""
    explained = explain_pixels(engine, [image.pixels for _, image in decoded], options)
    for (item, _), outcome in zip(decoded, explained, strict=True):
        result = results[item.path] = FileResult(
            str(item.path),
            classes=outcome.classes,
            labels=outcome.labels,
            scores=outcome.scores,
            method=",".join(maps.method for maps in outcome.maps),
            layer=outcome.layer,
        )
        for maps in outcome.maps:
            result.outputs += _write_outputs(
                item,
                maps.overlays,
                maps.heatmaps,
                names=(maps.method, ["all-classes"] if maps.class_agnostic else result.labels),
                output_dir=output_dir,
                options=options,
            )


def _write_outputs(
    item: InputFile,
    overlays: NDArray[np.uint8],
    heatmaps: NDArray[np.uint8],
    *,
    names: tuple[str, Sequence[str]],
    output_dir: Path,
    options: ExplainOptions,
) -> list[str]:
    """Each explained class's overlay (and heatmap); ``names`` is (method, label per rank)."""
    method, labels = names
    folder = output_dir / item.relative.parent
    folder.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for rank in range(overlays.shape[0]):
        base = folder / "_".join(
            file_name_part(part) for part in (item.relative.stem, method, labels[rank])
        )
        overlay_path = base.with_name(f"{base.name}_overlay.{options.format}")
        overlay_path.write_bytes(encode_image(overlays[rank], options.format))
        written.append(str(overlay_path))
        if options.heatmaps:
            heatmap_path = base.with_name(f"{base.name}_heatmap.png")
            heatmap_path.write_bytes(encode_image(heatmaps[rank], "png"))
            written.append(str(heatmap_path))
    return written


def file_name_part(text: str) -> str:
    """``text`` safe in a file name on every system: runs of other characters become '-'."""
    return UNSAFE_IN_NAMES.sub("-", text).strip("-") or "-"


def write_summary(results: Sequence[FileResult], path: Path) -> None:
    """Write ``results`` as JSON (``.json``) or CSV (any other suffix), one row per file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
        return
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["source", "class", "label", "score", "method", "layer", "outputs", "error"]
        )
        for r in results:
            writer.writerow(
                [
                    r.source,
                    ";".join(map(str, r.classes)),
                    ";".join(r.labels),
                    ";".join(f"{s:.6f}" for s in r.scores),
                    r.method,
                    r.layer,
                    ";".join(r.outputs),
                    r.error,
                ]
            )
