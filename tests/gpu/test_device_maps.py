"""Maps on the GPU equal maps on the CPU: every method, on a CNN, a ViT and the shipped models,
the same classes explained on both devices.

In float32 (TF32 off) every normalised map lies within ``FLOAT32_TOLERANCE`` of the CPU's.
Under bf16 and fp16 autocast (which Score-CAM's masked passes follow) and under torch's default
TF32 convolutions, the differences are recorded (``CAMSERVE_GPU_RECORD``) and held to the
bounds below, set before any GPU run: the first run's records say where they belong."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor

from camserve.engine.detection_maps import DETECTOR_METHODS, explain_detections
from camserve.engine.images.render import normalize_maps
from camserve.engine.methods import METHODS
from camserve.engine.results import CamResults
from tests.dense_matching import assert_same_detections
from tests.gpu.conftest import Record
from tests.gpu.subjects import SUBJECTS, Subject, scenes, shipped

ALL_METHODS = list(METHODS)
CPU = torch.device("cpu")
FLOAT32_TOLERANCE = 1e-4
TOLERANCE = {"float32": FLOAT32_TOLERANCE, "tf32": 0.05, "bf16": 0.1, "fp16": 0.05}
"""Largest difference of a normalised map (values in [0, 1]) from the CPU's, per precision."""
AUTOCAST = {"float32": None, "tf32": None, "bf16": torch.bfloat16, "fp16": torch.float16}

References = dict[str, tuple[Subject, CamResults]]


@pytest.fixture(scope="module")
def references() -> References:
    """Each subject's float32 CPU results, computed on first use."""
    return {}


def reference(name: str, cache: References) -> tuple[Subject, CamResults]:
    if name not in cache:
        subject = SUBJECTS[name]()
        engine = subject.engine(CPU, None)
        batch = engine.preprocessing(subject.images, CPU)
        cache[name] = subject, engine.compute_all(batch, ALL_METHODS, top_k=1)
    return cache[name]


def differences(expected: CamResults, found: CamResults) -> dict[str, float]:
    """Per method, the largest difference between the two devices' normalised maps; both
    devices refuse the same methods."""
    assert set(found.refusals) == set(expected.refusals)
    assert set(found.maps) == set(expected.maps)
    return {
        method: float((found.maps[key].layer_maps.cpu() - cams.layer_maps).abs().max())
        for key, cams in expected.maps.items()
        for method in [key[1]]
    }


def precision_on(gpu: torch.device, precision: str, request: pytest.FixtureRequest) -> None:
    """Skip what a dry run on the CPU cannot compare; set the float32 mode ``precision`` asks."""
    if gpu.type != "cuda" and precision != "float32":
        pytest.skip(f"{precision} is a CUDA precision")
    if precision != "tf32":
        request.getfixturevalue("ieee_float32")


@pytest.mark.parametrize("precision", list(AUTOCAST))
@pytest.mark.parametrize("name", list(SUBJECTS))
def test_every_methods_maps_on_the_gpu_equal_the_cpus(
    name: str,
    precision: str,
    gpu: torch.device,
    references: References,
    record: Record,
    request: pytest.FixtureRequest,
) -> None:
    precision_on(gpu, precision, request)
    subject, expected = reference(name, references)
    engine = subject.engine(gpu, AUTOCAST[precision])
    batch = engine.preprocessing([image.to(gpu) for image in subject.images], gpu)
    found = engine.compute_all(batch, ALL_METHODS, targets=expected.targets.to(gpu))
    assert torch.equal(found.targets.cpu(), expected.targets)
    measured = differences(expected, found)
    record("maps", model=name, precision=precision, max_difference=measured)
    assert len(measured) >= 6  # CAM and one more may be refused (a ViT's head), no others
    assert max(measured.values()) <= TOLERANCE[precision], measured


def normalised(raw: Tensor) -> Tensor:
    return normalize_maps(raw.clamp_min(0))


def test_the_shape_detectors_maps_on_the_gpu_equal_the_cpus(
    gpu: torch.device, ieee_float32: None, record: Record
) -> None:
    """The same detections, and each explained box's maps for every detector method."""
    module = shipped("shapes-detector").module  # type: ignore[attr-defined]
    images = [image.float() / 255 for image in scenes()]
    expected = explain_detections(module, images, DETECTOR_METHODS, max_detections=3)
    given = [
        (answer.explained_boxes.to(gpu), answer.explained_labels.to(gpu)) for answer in expected
    ]
    on_gpu = copy.deepcopy(module).to(gpu)
    found = explain_detections(
        on_gpu, [image.to(gpu) for image in images], DETECTOR_METHODS, given=given
    )
    measured: dict[str, float] = {}
    for wanted, answer in zip(expected, found, strict=True):
        assert len(wanted.explained_boxes) == 3
        assert_same_detections(
            answer.boxes.cpu(),
            answer.labels.cpu(),
            answer.scores.cpu(),
            wanted.boxes,
            wanted.labels,
            wanted.scores,
        )
        for (layer, method), raw in wanted.raw_maps.items():
            difference = normalised(answer.raw_maps[(layer, method)].cpu()) - normalised(raw)
            measured[method] = max(measured.get(method, 0.0), float(difference.abs().max()))
    record("maps", model="shapes-detector", precision="float32", max_difference=measured)
    assert sorted(measured) == sorted(DETECTOR_METHODS)
    assert max(measured.values()) <= FLOAT32_TOLERANCE, measured
