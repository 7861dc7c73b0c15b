"""``camserve train-dense``: train the shape detector or segmenter on generated object scenes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import torch
import typer
from rich.progress import TextColumn

from camserve.cli.common import cli, console, progress_bar
from camserve.config import DEFAULT_MODELS_DIR
from camserve_lab.dense_quality import evaluate_detector, evaluate_segmenter
from camserve_lab.dense_training import (
    DenseTrainingConfig,
    train_detector,
    train_segmenter,
    write_checkpoint,
)
from camserve_lab.held_out_dense import held_out_sets

__all__ = ["train_dense_command"]

CHECKPOINTS = {"detection": "shapes-detector.pt", "segmentation": "shapes-segmenter.pt"}


@cli.command("train-dense")
def train_dense_command(
    task: Annotated[
        Literal["detection", "segmentation"],
        typer.Argument(help="detection (shapes-detector) or segmentation (shapes-segmenter)."),
    ],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for the checkpoint.")
    ] = DEFAULT_MODELS_DIR,
    steps: Annotated[int, typer.Option(min=1, help="Optimiser steps.")] = (
        DenseTrainingConfig.steps
    ),
    batch_size: Annotated[int, typer.Option(min=1, help="Scenes per step.")] = (
        DenseTrainingConfig.batch_size
    ),
    learning_rate: Annotated[
        float, typer.Option(min=0.0, help="Peak learning rate of the one-cycle schedule.")
    ] = DenseTrainingConfig.learning_rate,
    held_out: Annotated[
        int, typer.Option(min=1, help="Scenes of each held-out set to score.")
    ] = 300,
    threads: Annotated[
        int, typer.Option(min=1, help="Torch threads (1 is fastest on a shared 2-core machine).")
    ] = 1,
    checkpoint_every: Annotated[
        int,
        typer.Option(min=0, help="Also write the checkpoint every so many steps (0: at the end)."),
    ] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the initialisation.")] = (
        DenseTrainingConfig.seed
    ),
    start_from: Annotated[
        Path | None,
        typer.Option("--from", exists=True, dir_okay=False, help="Fine-tune this checkpoint."),
    ] = None,
    varied: Annotated[
        int,
        typer.Option(
            min=0, max=10, help="Of every ten scenes, how many are of the varied settings."
        ),
    ] = DenseTrainingConfig.varied_tenths,
    first_scene: Annotated[
        int, typer.Option(min=0, help="Index of the first training scene.")
    ] = DenseTrainingConfig.first_scene,
    background_weight: Annotated[
        float,
        typer.Option(min=0.0, help="Segmentation: loss weight of background pixels (shapes: 1)."),
    ] = DenseTrainingConfig.background_weight,
    input_size: Annotated[
        int,
        typer.Option(min=32, help="Segmentation: the input side scenes are letterboxed into."),
    ] = DenseTrainingConfig.input_size,
) -> None:
    """Train camserve's shape detector or segmenter on the CPU, from scratch or from --from,
    write its checkpoint to --output and print its held-out quality (models/*.toml name the
    files)."""
    torch.set_num_threads(threads)
    config = DenseTrainingConfig(
        steps=steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
        checkpoint_every=checkpoint_every,
        start_from=start_from,
        varied_tenths=varied,
        first_scene=first_scene,
        background_weight=background_weight,
        input_size=input_size,
    )
    path = output / CHECKPOINTS[task]
    train = train_detector if task == "detection" else train_segmenter
    loss_column = TextColumn("loss {task.fields[loss]:.3f}")
    with progress_bar("training", loss_column, transient=False) as progress:
        bar = progress.add_task("train", total=config.steps, loss=float("nan"))
        model, report = train(
            config,
            on_step=lambda _step, loss: progress.update(bar, advance=1, loss=loss),
            on_checkpoint=lambda partial: write_checkpoint(partial, path),
        )
    write_checkpoint(model, path)
    console.print(
        f"{report.steps} steps, {report.scenes} scenes, {report.seconds:.0f} s; wrote {path}"
    )
    for name, scenes in held_out_sets(held_out).items():
        if task == "detection":
            quality = evaluate_detector(model, scenes)
            console.print(
                f"{name}: recall {quality.recall:.3f}, precision {quality.precision:.3f}, "
                f"mAP@0.5 {quality.mean_average_precision:.3f}"
            )
        else:
            seg = evaluate_segmenter(model, scenes, size=config.input_size)
            console.print(f"{name}: mean IoU {seg.mean_iou:.3f} {seg.iou}")
