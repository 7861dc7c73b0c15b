"""``camserve train-demo``: train the demo model on generated scenes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import TextColumn

from camserve.cli.common import cli, console, progress_bar
from camserve.config import DEFAULT_MODELS_DIR
from camserve_lab.scenes import DEFAULT_SIZE
from camserve_lab.training import TrainingConfig, train_demo, write_demo_model

__all__ = ["train_demo_command"]


@cli.command("train-demo")
def train_demo_command(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for the checkpoint and manifest.")
    ] = DEFAULT_MODELS_DIR,
    small_steps: Annotated[
        int, typer.Option(min=0, help="Steps at 64 pixels (fast; the shapes are learned).")
    ] = TrainingConfig.phases[0][1],
    full_steps: Annotated[
        int, typer.Option(min=1, help="Steps at 128 pixels, the size the model serves at.")
    ] = TrainingConfig.phases[1][1],
    batch_size: Annotated[int, typer.Option(min=1, help="Scenes per step.")] = (
        TrainingConfig.batch_size
    ),
    held_out: Annotated[
        int, typer.Option(min=1, help="Held-out scenes (other seed and settings) to score.")
    ] = TrainingConfig.held_out_images,
    first_scene: Annotated[
        int, typer.Option(min=0, help="Index of the first training scene (for continued runs).")
    ] = TrainingConfig.first_scene,
    learning_rate: Annotated[
        float, typer.Option(min=0.0, help="Peak learning rate of the one-cycle schedule.")
    ] = TrainingConfig.learning_rate,
    seed: Annotated[int, typer.Option(help="Seed of the initialisation.")] = TrainingConfig.seed,
    initial_weights: Annotated[
        Path | None,
        typer.Option(
            "--from",
            exists=True,
            dir_okay=False,
            help="Continue from this checkpoint (e.g. models/shapes.pt) instead of random weights.",
        ),
    ] = None,
) -> None:
    """Train the demo model on generated scenes and write it (with its manifest) to --output."""
    phases = (
        ((64, small_steps), (DEFAULT_SIZE, full_steps))
        if small_steps
        else ((DEFAULT_SIZE, full_steps),)
    )
    config = TrainingConfig(
        phases=phases,
        batch_size=batch_size,
        learning_rate=learning_rate,
        held_out_images=held_out,
        first_scene=first_scene,
        seed=seed,
        initial_weights=initial_weights,
    )
    loss_column = TextColumn("loss {task.fields[loss]:.3f}")
    with progress_bar("training", loss_column, transient=False) as progress:
        task = progress.add_task("train", total=config.steps, loss=float("nan"))
        model, report = train_demo(
            config, on_step=lambda _step, loss: progress.update(task, advance=1, loss=loss)
        )
    manifest = write_demo_model(model, report, output)
    console.print(
        f"held-out accuracy {report.accuracy:.2%} on {config.held_out_images} scenes, "
        f"{report.seconds:.0f} s; wrote {manifest}"
    )
