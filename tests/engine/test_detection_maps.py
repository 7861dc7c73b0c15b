"""Maps of detections: parity with pytorch-grad-cam's Eigen-CAM on the pyramid, gradient
methods against a float64 computation of the same definition, exact placement on the original
pixels, and batching that changes no answer."""

from __future__ import annotations

import copy
from collections import OrderedDict

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
import torchvision
from pytorch_grad_cam import EigenCAM
from pytorch_grad_cam.utils.model_targets import FasterRCNNBoxScoreTarget
from pytorch_grad_cam.utils.reshape_transforms import fasterrcnn_reshape_transform
from torch import Tensor, nn
from torchvision.models.detection.transform import resize_boxes
from torchvision.ops import box_iou
from torchvision.ops import boxes as box_ops

from camserve.engine.detection_maps import DetectionMaps, explain_detections, given_box
from camserve.engine.errors import InvalidTargetError, MethodNotApplicableError, UnknownLayerError
from camserve.engine.models.detector_pass import DetectorPass, run_detector
from tests.dense_matching import assert_decisive, assert_same_detections
from tests.engine.dense_models import DETECTOR_SIZE, detector, scene_images
from tests.tolerances import NETWORK, assert_float32_close

__all__: list[str] = []

TOLERANCE = NETWORK  # the rule of tests/tolerances.py, at the maps' scale
UNRESIZED = (DETECTOR_SIZE[0], DETECTOR_SIZE[1])
"""An image the detector takes as it is (no resize, no padding): pytorch-grad-cam stretches a
map over the whole padded input, so only there do its full-size maps mean the same pixels."""


@pytest.fixture(scope="module")
def model() -> nn.Module:
    return detector()


def noise(height: int, width: int) -> list[Tensor]:
    """An image of uniform noise: nothing in it for the shape detector to find."""
    return [torch.rand(3, height, width, generator=torch.Generator().manual_seed(6))]


def eigen_cam_differences(model: nn.Module, images: list[Tensor]) -> list[float]:
    """Per image: max |camserve - pytorch-grad-cam| of the full-size Eigen-CAM maps on the
    stacked pyramid (its ``fasterrcnn_reshape_transform``; the SVD's sign aligned first), for
    images the detector takes unresized."""
    ours = explain_detections(model, images, ["eigencam"], max_detections=2)
    targets = [FasterRCNNBoxScoreTarget(a.labels[:2], a.boxes[:2]) for a in ours]
    peer = EigenCAM(model, [model.backbone], reshape_transform=fasterrcnn_reshape_transform)
    theirs = peer(torch.stack(images), targets=targets)
    differences = []
    for answer, their_map in zip(ours, theirs, strict=True):
        our_maps = answer.full_maps("backbone", "eigencam")
        assert torch.equal(our_maps[0], our_maps[1])  # class-agnostic: shared by detections
        reference = torch.from_numpy(their_map)
        if float((our_maps[0] - reference).abs().max()) > TOLERANCE:  # the SVD's sign
            raw = -answer.raw_maps[("backbone", "eigencam")][:1]
            our_maps = DetectionMaps(*_fields(answer, raw)).full_maps("backbone", "eigencam")
        differences.append(float((our_maps[0] - reference).abs().max()))
    return differences


def test_eigen_cam_matches_pytorch_grad_cam_on_the_pyramid(model: nn.Module) -> None:
    differences = eigen_cam_differences(model, scene_images(2, UNRESIZED))
    assert max(differences) <= TOLERANCE


def _fields(answer: DetectionMaps, raw: Tensor) -> tuple[object, ...]:
    return (
        answer.boxes,
        answer.labels,
        answer.scores,
        answer.explained_boxes,
        answer.explained_labels,
        answer.targets,
        {("backbone", "eigencam"): raw},
        answer.placement,
    )


def float64_maps(model: nn.Module, run: DetectorPass, row: int, label: int) -> dict[str, Tensor]:
    """Grad-CAM and LayerCAM of one detection (the pass's proposal ``row``, class ``label``)
    from scratch in float64: the box head over every proposal of the pass, the pyramid as
    float64 leaves, the box-score target (IoU of the detection's box with itself, plus its
    score), the pyramid's absolute values and their gradients (each level's gradient times its
    sign) resized to the coarsest level, then each method's formula."""
    heads = _double(model).roi_heads
    levels = OrderedDict(
        (key, value.detach().double().requires_grad_(True)) for key, value in run.features.items()
    )
    proposals = [run.proposals[0].double()]
    size, original = run.image_sizes[0], run.original_sizes[0]
    with torch.enable_grad():
        logits, regression = heads.box_predictor(
            heads.box_head(heads.box_roi_pool(levels, proposals, [size]))
        )
        box = heads.box_coder.decode(regression, proposals)[row, label]
        box = resize_boxes(box_ops.clip_boxes_to_image(box[None], size), list(size), list(original))
        score = torch.softmax(logits, -1)[row, label]
        target = box_iou(box.detach(), box)[0, 0] + score
        gradients = torch.autograd.grad(target, list(levels.values()), allow_unused=True)
    values = [value.detach() for value in levels.values()]
    grid = values[-1].shape[-2:]
    activation = torch.cat([F.interpolate(v.abs(), size=grid, mode="bilinear") for v in values], 1)[
        0
    ]
    signed = [
        torch.zeros_like(v) if g is None else g * torch.sign(v)
        for v, g in zip(values, gradients, strict=False)
    ]
    gradient = torch.cat([F.interpolate(g, size=grid, mode="bilinear") for g in signed], 1)[0]
    weights = gradient.mean(dim=(-2, -1))
    return {
        "gradcam": (weights[:, None, None] * activation).sum(0),
        "layercam": (gradient.clamp_min(0) * activation).sum(0),
    }


def _double(model: nn.Module) -> nn.Module:
    return copy.deepcopy(model).double()


def float64_differences(model: nn.Module, image: Tensor, count: int) -> dict[str, float]:
    """Per method: the largest difference between camserve's raw map of each of the first
    ``count`` detections and the float64 computation, relative to the float64 map's peak."""
    answer = explain_detections(model, [image], ["gradcam", "layercam"], max_detections=count)[0]
    run = run_detector(model, [image])
    found = run.detections[0]
    worst = {"gradcam": 0.0, "layercam": 0.0}
    for k in range(count):
        assert torch.equal(found.boxes[k], answer.explained_boxes[k])
        reference = float64_maps(model, run, int(found.rows[k]), int(found.labels[k]))
        for method, expected in reference.items():
            ours = answer.raw_maps[("backbone", method)][k].double()
            peak = float(expected.abs().max())
            assert peak > 0
            worst[method] = max(worst[method], float((ours - expected).abs().max()) / peak)
    return worst


def test_gradient_methods_match_a_float64_computation_of_the_box_score_target(
    model: nn.Module,
) -> None:
    image = scene_images(1, (150, 200), seed=3)[0]
    assert max(float64_differences(model, image, 2).values()) <= TOLERANCE


def test_maps_land_on_the_original_pixels_through_the_detectors_resize() -> None:
    """An 80 x 120 image goes into a detector with min_size 160 and max_size 320 at 160 x 240
    (scale 2), padded to 160 x 256. A map hot on exactly the input pixels of the box
    (50, 40)-(150, 120) is hot on exactly the original pixels of (25, 20)-(75, 60) once placed
    back (each original pixel reads the two input pixels it became), and the padding, however
    hot, is never read."""
    model = detector((160, 320))
    image = scene_images(1, (80, 120))[0]
    answer = explain_detections(model, [image], ["eigencam"], max_detections=1)[0]
    assert answer.placement.input_size == (160, 256)
    assert answer.placement.resized == (160, 240)
    canvas = torch.zeros(1, 160, 256)
    canvas[0, 40:120, 50:150] = 1.0
    canvas[0, :, 240:] = 5.0
    placed = DetectionMaps(*_fields(answer, canvas)).full_maps("backbone", "eigencam")[0]
    expected = torch.zeros(80, 120)
    expected[20:60, 25:75] = 1.0
    assert torch.equal(placed, expected)
    boxes = run_detector(model, [image]).detections[0].boxes
    assert float(boxes[:, 2].max()) <= 120
    assert float(boxes[:, 3].max()) <= 80


def test_each_detection_and_each_image_gets_the_map_it_gets_alone(model: nn.Module) -> None:
    """Three images in one pass, then each alone: the same detections (up to rounding: the
    batch changes it) and each explained detection's maps within the rule's ``NETWORK``
    tolerance of their peak (under MKL's AVX2 path 1.03 times the 1e-5 this test once held)."""
    images = scene_images(3, (150, 200), seed=5, min_objects=3)
    layers, methods = ["backbone", "backbone[0]"], ["gradcam", "eigencam"]
    together = explain_detections(model, images, methods, layers, max_detections=3)
    for image, batched in zip(images, together, strict=True):
        assert_decisive(batched.scores[:4])  # the first three are the same three alone
        alone = explain_detections(model, [image], methods, layers, max_detections=3)[0]
        matches = assert_same_detections(
            batched.explained_boxes, batched.explained_labels, batched.scores[:3],
            alone.explained_boxes, alone.explained_labels, alone.scores[:3],
        )  # fmt: skip
        assert matches == [0, 1, 2]
        for key, maps in alone.raw_maps.items():
            for k in range(3):
                scale = float(maps[k].abs().max())
                assert scale > 0
                assert_float32_close(batched.raw_maps[key][k], maps[k], NETWORK, msg=str(key))
    assert not torch.equal(
        together[0].raw_maps[("backbone", "gradcam")], together[1].raw_maps[("backbone", "gradcam")]
    )


def test_images_of_other_sizes_get_their_own_pass(model: nn.Module) -> None:
    (small,), (large,) = scene_images(1, (120, 160)), scene_images(1, (200, 300), seed=2)
    answers = explain_detections(model, [small, large, small], ["eigencam"], max_detections=1)
    assert [answer.placement.image_size for answer in answers] == [
        (120, 160),
        (200, 300),
        (120, 160),
    ]
    assert torch.equal(
        answers[0].raw_maps[("backbone", "eigencam")], answers[2].raw_maps[("backbone", "eigencam")]
    )


@pytest.mark.parametrize("method", ["cam", "scorecam"])
def test_methods_that_read_class_logits_are_refused(model: nn.Module, method: str) -> None:
    with pytest.raises(MethodNotApplicableError, match="for detectors choose one of: gradcam"):
        explain_detections(model, noise(64, 64), [method])


def test_an_unknown_level_names_the_candidates(model: nn.Module) -> None:
    with pytest.raises(
        UnknownLayerError,
        match=r"candidates: backbone, backbone\[0\], backbone\[pool\]$",
    ):
        explain_detections(model, noise(64, 64), ["eigencam"], ["backbone[7]"])


def test_no_detection_to_explain_gives_no_maps(model: nn.Module) -> None:
    answer = explain_detections(model, noise(64, 64), ["gradcam"], score_threshold=0.99)[0]
    assert len(answer.boxes) == 0
    assert answer.raw_maps[("backbone", "gradcam")].shape[0] == 0
    assert answer.targets.numel() == 0


def test_a_given_box_is_explained_and_checked() -> None:
    labels = ["__background__", "person", "bicycle"]
    boxes, classes = given_box("10, 20, 110, 90", "Person", labels, (100, 200))
    assert boxes.tolist() == [[10.0, 20.0, 110.0, 90.0]]
    assert classes.tolist() == [1]
    assert given_box([0, 0, 200, 100], 2, labels, (100, 200))[1].tolist() == [2]


@pytest.mark.parametrize(
    ("box", "target", "message"),
    [
        ("10,20,110", "person", "four numbers"),
        ("10,20,x,90", "person", "four numbers"),
        ("10,20,210,90", "person", "not a box inside the 200 x 100 image"),
        ("50,20,40,90", "person", "is empty: it needs x0 < x1"),
        ("-1,20,40,90", "person", "not a box inside"),
        ("10,20,110,90", "giraffe", "unknown class label 'giraffe'"),
        ("10,20,110,90", "__background__", "0 is the background"),
        ("10,20,110,90", 3, "not one of this detector's classes"),
    ],
)
def test_a_bad_given_box_is_refused(box: str, target: object, message: str) -> None:
    with pytest.raises(InvalidTargetError, match=message):
        given_box(box, target, ["__background__", "person", "bicycle"], (100, 200))  # type: ignore[arg-type]


def test_a_given_box_gets_its_detections_map(model: nn.Module) -> None:
    image = scene_images(1, (150, 200), seed=4)[0]
    found = explain_detections(model, [image], ["gradcam"], max_detections=1)[0]
    x0, y0, x1, y1 = (float(value) for value in found.boxes[0])
    label = int(found.labels[0])
    given = given_box(f"{x0},{y0},{x1},{y1}", label, [str(i) for i in range(6)], (150, 200))
    answer = explain_detections(model, [image], ["gradcam"], given=[given])[0]
    expected = found.raw_maps[("backbone", "gradcam")][0]
    assert_float32_close(answer.raw_maps[("backbone", "gradcam")][0], expected, NETWORK)
    elsewhere = given_box("0,0,3,3", label, [str(i) for i in range(6)], (150, 200))
    empty = explain_detections(model, [image], ["gradcam"], given=[elsewhere])[0]
    assert empty.targets.tolist() == [0.0]
    assert float(empty.raw_maps[("backbone", "gradcam")].abs().max()) == 0.0


def test_a_one_stage_detector_gets_eigen_cam_and_refuses_gradient_methods() -> None:
    ssd = torchvision.models.get_model(
        "ssdlite320_mobilenet_v3_large", weights=None, weights_backbone=None, num_classes=91
    ).eval()
    ssd.requires_grad_(False)
    image = noise(120, 160)[0]
    answer = explain_detections(ssd, [image], ["eigencam"], max_detections=2, score_threshold=0.0)[
        0
    ]
    maps = answer.full_maps("backbone", "eigencam")
    assert maps.shape == (2, 120, 160)
    assert float(maps.amax()) == 1.0
    with pytest.raises(MethodNotApplicableError, match="explained by eigencam"):
        explain_detections(ssd, [image], ["gradcam"], max_detections=1, score_threshold=0.0)
