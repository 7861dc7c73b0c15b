"""``camserve cvat-function``: write the nuclio ``function.yaml`` that makes a served model a
CVAT detector (see docs/cvat.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from camserve.cli.common import ModelsDir, ScoreThresholdOption, cli, console, fail
from camserve.config import DEFAULT_MODELS_DIR
from camserve.engine.detection_maps import DEFAULT_SCORE_THRESHOLD
from camserve.engine.errors import CamserveError
from camserve.engine.images.regions import parse_threshold
from camserve.engine.models.manifest import ModelSpec
from camserve.labeling.cvat import (
    DEFAULT_NETWORK,
    DEFAULT_URL,
    SHAPE_TYPES,
    FunctionOptions,
    function_labels,
    function_yaml,
    parse_shapes,
)
from camserve.serving.served_models import find_spec
from camserve.serving.tasks.lookup import task_adapter

__all__ = ["cvat_function"]


@cli.command("cvat-function")
def cvat_function(
    model: Annotated[str, typer.Option("--model", "-m", help="The served model to annotate with.")],
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
    url: Annotated[
        str, typer.Option(help="camserve's URL as the function container reaches it.")
    ] = DEFAULT_URL,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Where to write function.yaml (default: stdout)."),
    ] = None,
    method: Annotated[str, typer.Option(help="CAM method of the heatmaps.")] = "gradcam",
    top_k: Annotated[int, typer.Option(min=1, help="Classes explained per image.")] = 1,
    threshold: Annotated[
        str, typer.Option(help="Heatmap threshold: fraction of the maximum, or 'otsu'.")
    ] = "0.5",
    shapes: Annotated[str, typer.Option(help="CVAT shapes to return, comma-separated.")] = ",".join(
        SHAPE_TYPES
    ),
    network: Annotated[
        str, typer.Option(help="Docker network of CVAT that the function joins.")
    ] = DEFAULT_NETWORK,
    score_threshold: ScoreThresholdOption = DEFAULT_SCORE_THRESHOLD,
) -> None:
    """Write the nuclio function configuration that serves MODEL to CVAT as a detector.

    A detector model's function returns its boxes (rectangles), a segmenter's its masks."""
    try:
        parse_threshold(threshold)
        spec = find_spec(models_dir, model)
        options = FunctionOptions(
            model=model,
            labels=_labels(spec),
            task=spec.task,
            score_threshold=f"{score_threshold:g}",
            url=url,
            method=method,
            shapes=parse_shapes(shapes),
            top_k=top_k,
            threshold=threshold,
            network=network,
        )
        text = function_yaml(options)
    except (CamserveError, ValueError) as error:
        raise fail(str(error)) from error
    if output is None:
        typer.echo(text, nl=False)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    labels = len(function_labels(options))
    console.print(f"wrote {output} ({labels} labels)", highlight=False, soft_wrap=True)


def _labels(spec: ModelSpec) -> list[str]:
    """The model's labels, without building it (its kind's adapter reads them)."""
    return task_adapter(spec.task).labels(spec)
