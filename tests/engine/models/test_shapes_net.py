"""camserve's own demo network: shapes of its outputs and maps, and a CAM-exact head."""

from __future__ import annotations

import torch

from camserve.engine.engine import CamEngine
from camserve.engine.models.registry import build_model, default_layer
from camserve.engine.models.shapes_net import SHAPES_NET, ShapesNet
from tests.tolerances import NETWORK, assert_float32_close


def test_logits_and_the_layer4_map_resolution() -> None:
    model = ShapesNet(num_classes=5).eval()
    record: list[torch.Size] = []
    handle = model.layer4.register_forward_hook(lambda _m, _i, out: record.append(out.shape))
    with torch.no_grad():
        logits = model(torch.randn(2, 3, 128, 128))
    handle.remove()
    assert logits.shape == (2, 5)
    assert record == [torch.Size([2, 128, 16, 16])]  # stride 8: fine maps for localisation


def test_registered_with_layer4_as_default_and_cam_is_exact() -> None:
    model = build_model(SHAPES_NET, 5)
    assert isinstance(model, ShapesNet)
    assert default_layer(SHAPES_NET, model) == "layer4"
    engine = CamEngine(model, "layer4", device="cpu")
    images = torch.randn(3, 3, 64, 64)
    cam = engine.compute(images, "cam", targets=[0, 2, 4])
    grad_cam = engine.compute(images, "gradcam", targets=[0, 2, 4])
    assert_float32_close(cam.layer_maps, grad_cam.layer_maps, NETWORK)
