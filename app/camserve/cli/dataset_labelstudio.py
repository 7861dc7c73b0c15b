"""``camserve dataset-labelstudio``: an ``explain-dataset`` output as Label Studio tasks with
predictions (the JSON file its import takes)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from camserve.cli.common import DatasetOutput, cli, console, fail
from camserve.engine.errors import CamserveError

__all__ = ["LOCAL_FILES_HINT", "dataset_labelstudio"]

LOCAL_FILES_HINT = (
    "note: the tasks name image files on this machine, which Label Studio shows only once it "
    "serves them: for its local files storage pass --local-files-root with its "
    "LOCAL_FILES_DOCUMENT_ROOT (each path is then written relative to it), or for a web server "
    "--image-prefix with the URL to put before each path"
)


@cli.command("dataset-labelstudio")
def dataset_labelstudio(
    dataset: DatasetOutput,
    output: Annotated[Path, typer.Option("--output", "-o", help="The tasks file (.json).")],
    label_config: Annotated[
        Path | None,
        typer.Option(
            help="The project's labeling config (XML); its RectangleLabels and PolygonLabels "
            "are filled. Default: RectangleLabels 'label' on Image 'image'."
        ),
    ] = None,
    image_prefix: Annotated[
        str,
        typer.Option(
            help="Put before each image path: a web server's URL, or /data/local-files/?d= for "
            "Label Studio's local files storage (paths then relative to --local-files-root)."
        ),
    ] = "",
    local_files_root: Annotated[
        Path | None,
        typer.Option(
            help="Label Studio's local files root: image paths are written relative to it, "
            "after /data/local-files/?d= (implied). With that prefix, default: the "
            "LOCAL_FILES_DOCUMENT_ROOT setting.",
            show_default=False,
        ),
    ] = None,
    method: Annotated[
        str | None, typer.Option(help="Only this method's predictions (default: every method).")
    ] = None,
) -> None:
    """Write one Label Studio task per explained image, one prediction per CAM method."""
    from camserve.dataset.label_studio_tasks import TaskOptions, label_studio_tasks  # noqa: PLC0415
    from camserve.dataset.local_files import task_image_paths  # noqa: PLC0415
    from camserve.dataset.stored import read_images  # noqa: PLC0415 (pyarrow: the dataset extra)

    try:
        paths = task_image_paths(image_prefix, local_files_root, os.environ)
        config = None if label_config is None else label_config.read_text(encoding="utf-8")
        images = read_images(dataset, [method] if method else [])
        tasks = label_studio_tasks(images, TaskOptions(config, paths))
    except (CamserveError, ValueError, OSError) as error:
        raise fail(str(error)) from error
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(tasks, indent=1) + "\n", encoding="utf-8")
    console.print(f"wrote {len(tasks)} tasks to {output}", highlight=False)
    if not paths.prefix and any("://" not in image.path for image in images):
        console.print(LOCAL_FILES_HINT, highlight=False, soft_wrap=True)
