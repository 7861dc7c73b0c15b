"""``camserve dataset-cvat``: an ``explain-dataset`` output as annotations CVAT imports
("CVAT for images 1.1")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from camserve.cli.common import DatasetOutput, cli, console, fail
from camserve.engine.errors import CamserveError

__all__ = ["dataset_cvat"]


@cli.command("dataset-cvat")
def dataset_cvat(
    dataset: DatasetOutput,
    output: Annotated[Path, typer.Option("--output", "-o", help="The annotations file (.xml).")],
    method: Annotated[
        str | None, typer.Option(help="The CAM method whose regions to write (default: the first).")
    ] = None,
    shapes: Annotated[
        str, typer.Option(help="rectangle, polygon or both, comma-separated.")
    ] = "rectangle,polygon",
) -> None:
    """Write each explained image's regions as CVAT boxes and polygons of the explained class;
    import the file into the CVAT task holding the same images (Upload annotations, CVAT 1.1)."""
    from camserve.dataset.cvat_annotations import cvat_annotations  # noqa: PLC0415
    from camserve.dataset.stored import read_images  # noqa: PLC0415 (pyarrow: the dataset extra)

    try:
        images = read_images(dataset)
        methods = list(dict.fromkeys(m for image in images for m in image.methods()))
        chosen = method or (methods[0] if methods else None)
        if chosen is None:
            raise ValueError(f"{dataset} holds no explained image")
        wanted = tuple(part.strip() for part in shapes.split(",") if part.strip())
        text = cvat_annotations(images, chosen, wanted)
    except (CamserveError, ValueError, OSError) as error:
        raise fail(str(error)) from error
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    console.print(f"wrote {chosen} regions of {len(images)} images to {output}", highlight=False)
