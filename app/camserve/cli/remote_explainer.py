"""``camserve explain --server URL``: the files go to a running camserve through the client,
and come back as the same files a local run writes (``folder_explainer.py``), named the same
way, so a script can switch between a local model and a remote service without changes.

An error about one file (not an image, too large, an unsupported mode) skips that file; any
other (the server unreachable, a wrong key, an unknown model or parameter) ends the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import closing
from pathlib import Path

from camserve.cli.folder_explainer import ExplainOptions, FileResult, file_name_part
from camserve.engine.images.image_files import InputFile
from camserve_client import (
    BadRequestError,
    CamserveError,
    Client,
    ExplainResult,
    Explanation,
    InputError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
)
from camserve_client.options import ExplainOptions as RequestOptions

__all__ = ["FILE_ERRORS", "explain_remotely"]

FILE_ERRORS = (BadRequestError, PayloadTooLargeError, UnsupportedMediaTypeError, InputError)
"""Errors about one file: it is skipped and the run goes on."""
AGNOSTIC_NAME = "all-classes"


def explain_remotely(
    client: Client,
    files: Sequence[InputFile],
    output_dir: Path,
    options: ExplainOptions,
    *,
    model: str | None = None,
    concurrency: int,
    on_done: Callable[[FileResult], None] = lambda _result: None,
) -> list[FileResult]:
    """Explain ``files`` on the server behind ``client``, writing what a local run writes under
    ``output_dir`` (``model``: one of the server's, default its default); raises the first
    error that is not about one file."""
    results: list[FileResult] = []
    sources = [item.path for item in files]
    request = request_options(options, model)
    with closing(client.explain_each(sources, concurrency=concurrency, **request)) as outcomes:
        for item, outcome in zip(files, outcomes, strict=True):
            if isinstance(outcome, FILE_ERRORS):
                result = FileResult(str(item.path), error=outcome.message)
            elif isinstance(outcome, CamserveError):
                raise outcome
            else:
                result = _write_result(item, outcome, output_dir, options)
            results.append(result)
            on_done(result)
    return results


def request_options(options: ExplainOptions, model: str | None = None) -> RequestOptions:
    """The query of a local run's options: the overlay (and heatmap), no predictions list."""
    request = RequestOptions(
        top_k=options.top_k,
        alpha=options.alpha,
        colormap=options.colormap,
        format=options.format,
        include=("overlay", "heatmap") if options.heatmaps else ("overlay",),
        predictions=0,
    )
    if model is not None:
        request["model"] = model
    if options.methods:
        request["methods"] = options.methods
    if options.layer is not None:
        request["layers"] = options.layer
    if options.target is not None:
        request["target"] = options.target
    return request


def _write_result(
    item: InputFile, answer: ExplainResult, output_dir: Path, options: ExplainOptions
) -> FileResult:
    ranked = {e.rank: e for e in answer.explanations if not e.class_agnostic}
    ranked = ranked or {1: answer.explanations[0]}
    classes = [ranked[rank] for rank in sorted(ranked)]
    result = FileResult(
        str(item.path),
        classes=[e.class_index for e in classes],
        labels=[e.label for e in classes],
        scores=[round(e.probability, 6) for e in classes],
        method=",".join(answer.methods),
        layer=answer.layer,
    )
    folder = output_dir / item.relative.parent
    folder.mkdir(parents=True, exist_ok=True)
    for explanation in answer.explanations:
        result.outputs += _write_files(folder, item, explanation, options)
    return result


def _write_files(
    folder: Path, item: InputFile, explanation: Explanation, options: ExplainOptions
) -> list[str]:
    label = AGNOSTIC_NAME if explanation.class_agnostic else explanation.label
    base = "_".join(
        file_name_part(part) for part in (item.relative.stem, explanation.method, label)
    )
    written: list[str] = []
    for suffix, data in (
        (f"overlay.{options.format}", explanation.overlay_data),
        ("heatmap.png", explanation.heatmap_data),
    ):
        if data is not None:
            path = folder / f"{base}_{suffix}"
            path.write_bytes(data)
            written.append(str(path))
    return written
