"""Explain files and folders from the command line: find images, batch them, write results.

Bad files are reported and skipped; one unreadable image never aborts a run.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from app.engine.engine import CamEngine
from app.engine.errors import ImageError
from app.engine.image_files import InputFile
from app.engine.imaging import DecodedImage, decode_image, encode_image

__all__ = ["ExplainOptions", "FileResult", "explain_files", "write_summary"]


@dataclass(frozen=True)
class ExplainOptions:
    method: str = "gradcam"
    layer: str | None = None
    target: str | None = None
    top_k: int = 1
    alpha: float = 0.5
    colormap: str = "jet"
    format: str = "png"
    heatmaps: bool = False
    batch_size: int = 8
    max_pixels: int = 40_000_000


@dataclass
class FileResult:
    """One input file's outcome: its outputs and predictions, or the reason it was skipped."""

    source: str
    outputs: list[str] = field(default_factory=list)
    classes: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    method: str = ""
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
        except (ImageError, OSError) as error:
            results[item.path] = FileResult(str(item.path), error=str(error))
    if decoded:
        targets = None if options.target is None else [options.target] * len(decoded)
        explanation = engine.explain(
            [image.pixels for _, image in decoded],
            options.method,
            targets,
            top_k=options.top_k,
            layer=options.layer,
            alpha=options.alpha,
            colormap=options.colormap,
        )
        probabilities = explanation.cams.probabilities.cpu()
        for index, (item, _) in enumerate(decoded):
            classes = explanation.cams.targets[index].tolist()
            result = FileResult(
                str(item.path),
                classes=classes,
                labels=[engine.label_of(c) for c in classes],
                scores=[round(float(probabilities[index, c]), 6) for c in classes],
                method=explanation.cams.method,
                layer=explanation.cams.layer,
            )
            rendered = explanation.images[index]
            result.outputs = _write_outputs(
                item,
                rendered.overlays.cpu().numpy(),
                rendered.heatmaps.cpu().numpy(),
                output_dir,
                options,
            )
            results[item.path] = result
    return [results[item.path] for item in chunk]


def _write_outputs(
    item: InputFile,
    overlays: NDArray[np.uint8],
    heatmaps: NDArray[np.uint8],
    output_dir: Path,
    options: ExplainOptions,
) -> list[str]:
    base = output_dir / item.relative.parent / item.relative.stem
    base.parent.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for rank in range(overlays.shape[0]):
        suffix = "" if overlays.shape[0] == 1 else f"_top{rank + 1}"
        overlay_path = base.with_name(f"{base.name}_overlay{suffix}.{options.format}")
        overlay_path.write_bytes(encode_image(overlays[rank], options.format))
        written.append(str(overlay_path))
        if options.heatmaps:
            heatmap_path = base.with_name(f"{base.name}_heatmap{suffix}.png")
            heatmap_path.write_bytes(encode_image(heatmaps[rank], "png"))
            written.append(str(heatmap_path))
    return written


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
