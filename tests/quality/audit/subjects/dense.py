"""The shipped detector and segmenter as the report audits them, and held-out object scenes as
reference samples (each scene's first shape: its class and box)."""

from __future__ import annotations

import torch

from camserve.engine.engine import CamEngine
from camserve.engine.models.dense import load_dense_model
from camserve.quality.audit.run import Audit, AuditSettings, run_audit
from camserve.quality.audit.subjects import AuditedModel, audited
from camserve.quality.datasets import EvalSample
from camserve.serving.detector_jobs import DetectorExplainer
from camserve.serving.served_models import find_spec
from tests.support import SHIPPED_MODELS, held_out_scenes


def shipped_subject(name: str) -> AuditedModel:
    """``shapes-detector`` or ``shapes-segmenter``, on the CPU."""
    loaded = load_dense_model(find_spec(SHIPPED_MODELS, name))
    if loaded.task == "detection":
        return audited(DetectorExplainer(loaded, torch.device("cpu")))
    return audited(CamEngine.from_loaded(loaded, device="cpu"))


def scene_samples(count: int, *, labelled: bool = True) -> list[EvalSample]:
    """``count`` held-out scenes; ``labelled``: with their first shape's class and box."""
    samples = []
    for index, scene in enumerate(held_out_scenes(count, min_objects=1)):
        pixels = torch.from_numpy(scene.image).permute(2, 0, 1).contiguous()
        first = scene.objects[0]
        label, box = (first.label, first.box) if labelled else (None, None)
        samples.append(EvalSample(f"scene-{index}", pixels, label, box))
    return samples


def quick_audit(subject: AuditedModel, methods: tuple[str, ...], layers: tuple[str, ...]) -> Audit:
    """``subject``'s report on 3 labelled scenes at cheap settings: ROAD at 90, 3-point curves,
    the cascade down to the rule's step."""
    settings = AuditSettings(
        methods=methods, layers=layers, percentiles=(90,), curve_steps=3, full_cascade=False
    )
    return run_audit(subject, scene_samples(3), settings, model="shipped", version="test")
