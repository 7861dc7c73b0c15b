"""``camserve audit``: the explanation report of one model (sanity, faithfulness, localisation)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from camserve.cli.common import (
    DeviceOption,
    ModelsDir,
    choose_spec,
    cli,
    console,
    fail,
)
from camserve.config import DEFAULT_MODELS_DIR
from camserve.engine.detection_maps import unknown_detector_layer
from camserve.engine.errors import CamserveError
from camserve.engine.fusion import FUSED_LAYER
from camserve.engine.methods import get_method
from camserve.engine.models.manifest import ModelSpec
from camserve.engine.targets import class_index
from camserve.quality.audit.candidates import DEFAULT_METHODS
from camserve.quality.audit.faithfulness import DEFAULT_CURVE_STEPS
from camserve.quality.audit.files import write_audit
from camserve.quality.audit.reference import SAMPLES, reference_folder
from camserve.quality.audit.road import DEFAULT_PERCENTILES
from camserve.quality.audit.run import Audit, AuditRow, AuditSettings, run_audit
from camserve.quality.audit.sanity import DEFAULT_SEEDS
from camserve.quality.audit.subjects import AuditedModel, audited
from camserve.quality.audit.subjects.classifier import ClassifierSubject
from camserve.quality.datasets import samples_from_folder
from camserve.serving.model_versions import ModelVersions
from camserve.serving.tasks.lookup import task_adapter

__all__ = ["SAMPLES", "audit_command", "reference_folder"]


@cli.command("audit")
def audit_command(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Folder for audit.json, .csv and .png.")
    ],
    model: Annotated[str | None, typer.Option(help="Model name from the models folder.")] = None,
    images: Annotated[
        Path | None,
        typer.Option(
            help="Reference images (default: the model's shipped samples).", show_default=False
        ),
    ] = None,
    boxes: Annotated[
        Path | None,
        typer.Option(
            help="Boxes of the images, for localisation: CSV (file,x0,y0,x1,y1[,label]) or COCO."
        ),
    ] = None,
    methods: Annotated[
        str | None, typer.Option(help="Comma-separated methods (default: all but Score-CAM).")
    ] = None,
    layers: Annotated[
        str | None,
        typer.Option(help="Comma-separated layers (default: the default, fused and last block)."),
    ] = None,
    road_percentiles: Annotated[
        str, typer.Option(help="ROAD percentiles: at p, the pixels above the p-th are removed.")
    ] = ",".join(str(p) for p in DEFAULT_PERCENTILES),
    curve_steps: Annotated[
        int, typer.Option(min=2, help="Points on each deletion / insertion curve.")
    ] = DEFAULT_CURVE_STEPS,
    seed: Annotated[
        int, typer.Option(help="First seed of the randomised weights; ROAD's noise's seed.")
    ] = 0,
    seeds: Annotated[
        int,
        typer.Option(min=1, help="Cascades of randomised weights (seeds --seed, --seed + 1, ...)."),
    ] = DEFAULT_SEEDS,
    timings: Annotated[bool, typer.Option(help="Print what each stage and pair cost.")] = False,
    device: DeviceOption = "auto",
    models_dir: ModelsDir = DEFAULT_MODELS_DIR,
) -> None:
    """Check whether each method's maps can be trusted: sanity, faithfulness, localisation.

    Randomises the weights from the logits down and compares the maps; scores ROAD and
    deletion / insertion; with --boxes, the pointing games. Classifiers, segmenters and
    detectors alike. Writes JSON, CSV and a chart.
    """
    try:
        spec = choose_spec(models_dir, model, None, "DEFAULT", None)
        subject, labels = _audited(spec, device)
        folder = images or reference_folder(spec.name)
        samples, skipped = samples_from_folder(
            folder, boxes, lambda name: class_index(labels, name)
        )
        for file in skipped:
            console.print(f"[yellow]skipped[/] {file.path}: {file.reason}", highlight=False)
        if not samples:
            raise CamserveError(f"no readable images in {folder}")
        settings = AuditSettings(
            methods=_methods(methods),
            layers=_layers(subject, layers),
            percentiles=_percentiles(road_percentiles),
            curve_steps=curve_steps,
            seed=seed,
            seeds=seeds,
        )
        audit = run_audit(
            subject,
            samples,
            settings,
            model=spec.name,
            version=ModelVersions().version_of(spec),
            on_progress=lambda message, _done: console.print(f"[dim]{message}[/]", highlight=False),
        )
    except (CamserveError, ValueError) as error:
        raise fail(str(error)) from error
    paths = write_audit(audit, output)
    typer.echo(_summary(audit, timings))
    console.print(f"wrote {', '.join(str(path) for path in paths.values())}", highlight=False)


def _names(text: str | None) -> list[str]:
    return list(dict.fromkeys(name.strip() for name in (text or "").split(",") if name.strip()))


def _methods(text: str | None) -> tuple[str, ...]:
    names = _names(text)
    return (
        tuple(dict.fromkeys(get_method(name).name for name in names)) if names else DEFAULT_METHODS
    )


def _audited(spec: ModelSpec, device: str) -> tuple[AuditedModel, list[str] | None]:
    """The model ``spec`` describes as the report audits it, and its labels."""
    explainer, labels = task_adapter(spec.task).build(spec, device)
    return audited(explainer), labels


def _layers(subject: AuditedModel, text: str | None) -> tuple[str, ...]:
    names = _names(text) or subject.candidate_layers()
    for name in names:
        if isinstance(subject, ClassifierSubject):
            if name != FUSED_LAYER or not subject.engine.fusion_layers:
                subject.engine.layer_module(name)
        elif name not in subject.candidate_layers():
            raise unknown_detector_layer(name, subject.candidate_layers())
    return tuple(names)


def _percentiles(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(value) for value in _names(text))
    except ValueError:
        raise ValueError(f"--road-percentiles takes whole numbers, got {text!r}") from None
    if not values or not all(0 < value < 100 for value in values):
        raise ValueError(f"--road-percentiles must lie between 0 and 100, got {text!r}")
    return values


def _summary(audit: Audit, timings: bool) -> str:
    """The report as a plain table (and, with ``timings``, each stage's seconds): the sanity
    verdict with the rule's Spearman as its mean and range over the seeds, ROAD with its 95 %
    interval and the ranks it may hold at its layer."""
    lines = [
        f"{audit.model} ({audit.version}) on {len(audit.images)} images, "
        f"{audit.settings.seeds} seeds",
        f"{'method':<10} {'layer':<10} {'sanity':<9} {'spearman':<21} {'road':>7} "
        f"{'interval':<16} {'rank':<5} {'deletion':>8} {'insertion':>9}"
        + (f" {'seconds':>7}" if timings else ""),
    ]
    for row in audit.rows:
        line = (
            f"{row.method:<10} {row.layer:<10} {_verdict(row):<9} {_spread(row):<21} "
            f"{row.faithfulness.road.combined:>7.3f} {_interval(audit, row):<16} "
            f"{_rank(audit, row):<5} {row.faithfulness.deletion_auc:>8.3f} "
            f"{row.faithfulness.insertion_auc:>9.3f}"
        )
        lines.append(line + (f" {row.faithfulness.seconds:>7.1f}" if timings else ""))
    for (method, layer), reason in audit.left_out.items():
        lines.append(f"left out: {method} at {layer}: {reason}")
    if timings:
        lines.append(", ".join(f"{stage} {value:.1f} s" for stage, value in audit.seconds.items()))
    return "\n".join(lines)


def _verdict(row: AuditRow) -> str:
    verdict = row.sanity.verdict.value
    return verdict.upper() if verdict == "fail" else verdict


def _spread(row: AuditRow) -> str:
    """The mean over the seeds, and their range: "0.22 (-0.14..0.57)"; "|r|" when signless."""
    by_seed = row.sanity.decisive_by_seed
    mean = f"{row.sanity.decisive_spearman:.2f}"
    spread = f"{mean} ({min(by_seed):.2f}..{max(by_seed):.2f})" if len(by_seed) > 1 else mean
    return spread + (" |r|" if row.sanity.sign_free else "")


def _interval(audit: Audit, row: AuditRow) -> str:
    rank = audit.ranks.get((row.method, row.layer))
    if rank is None or rank.interval is None:
        return "-"
    low, high = rank.interval
    return f"[{low:.3f}, {high:.3f}]"


def _rank(audit: Audit, row: AuditRow) -> str:
    rank = audit.ranks.get((row.method, row.layer))
    if rank is None:
        return "-"
    return str(rank.best) if not rank.tied else f"{rank.best}-{rank.worst}"
