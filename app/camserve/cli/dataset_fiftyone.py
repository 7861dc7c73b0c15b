"""``camserve dataset-fiftyone``: an ``explain-dataset`` output as a FiftyOne dataset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from camserve.cli.common import DatasetOutput, cli, console, fail
from camserve.engine.errors import CamserveError
from camserve.labeling.fiftyone_documents import DEFAULT_FIELD

__all__ = ["dataset_fiftyone"]


@cli.command("dataset-fiftyone")
def dataset_fiftyone(
    dataset: DatasetOutput,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for samples.json and heatmaps/.")
    ],
    name: Annotated[
        str | None, typer.Option(help="Dataset name (default: the output folder's name).")
    ] = None,
    field: Annotated[str, typer.Option(help="Prefix of the field names.")] = DEFAULT_FIELD,
) -> None:
    """Write samples.json (load with fiftyone.Dataset.from_json) and the heatmap PNGs."""
    from camserve.dataset.fiftyone_samples import fiftyone_dataset  # noqa: PLC0415
    from camserve.dataset.stored import read_images  # noqa: PLC0415 (pyarrow: the dataset extra)

    try:
        images = read_images(dataset)
        path = fiftyone_dataset(
            images,
            output,
            name=name or output.resolve().name,
            prefix=field,
            info={"source": dataset},
        )
    except (CamserveError, ValueError, OSError) as error:
        raise fail(str(error)) from error
    console.print(
        f'wrote {path}\nload it with: fiftyone.Dataset.from_json("{path}")', highlight=False
    )
