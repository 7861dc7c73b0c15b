"""Rendering on the GPU: heatmaps and overlays are drawn on the device, within one grey level of
the CPU's drawing of the same maps, and a served request copies only uint8 images (and small
layer-resolution maps) off the device, never a float map at the image's resolution."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from fastapi.testclient import TestClient

from camserve.api.application import create_app
from camserve.engine.images.render import RenderOptions, render_together
from camserve.engine.methods import METHODS
from tests.api.helpers import make_settings, wait_ready
from tests.gpu.conftest import Record
from tests.gpu.subjects import PHOTOS, SUBJECTS, read
from tests.support import photo_bytes, write_test_models

CPU = torch.device("cpu")
WIDTH, HEIGHT = 640, 480


def test_every_rendering_stays_on_the_device_as_uint8(gpu: torch.device) -> None:
    subject = SUBJECTS["shapes"]()
    engine = subject.engine(gpu, None)
    images = [image.to(gpu) for image in subject.images]
    explained = engine.explain_all(images, list(METHODS), top_k=2)
    assert sorted(method for _, method in explained.rendered) == sorted(METHODS)
    for (_, method), by_image in explained.rendered.items():
        ranks = 1 if METHODS[method].class_agnostic else 2  # Eigen-CAM: one map per image
        for index, original in enumerate(images):
            drawn = by_image[index]
            overlays = drawn.require_overlays()
            assert (drawn.heatmaps.device.type, overlays.device.type) == (gpu.type, gpu.type)
            assert (drawn.heatmaps.dtype, overlays.dtype) == (torch.uint8, torch.uint8)
            assert overlays.shape == (ranks, *original.shape[1:], 3)


@pytest.mark.parametrize("placed", [False, True], ids=["stretched", "letterboxed"])
def test_the_gpu_draws_the_same_maps_as_the_cpu(
    gpu: torch.device, placed: bool, record: Record
) -> None:
    """The same layer-resolution maps over two photos of different sizes, with two sets of
    render options, stretched over the image or placed back through the model's letterbox."""
    images = read(PHOTOS)
    maps = torch.rand((2, 3, 7, 7), generator=torch.Generator().manual_seed(3))
    options = [RenderOptions(), RenderOptions(alpha=0.3, colormap="viridis")]
    placement = SUBJECTS["shapes"]().engine(CPU, None).preprocessing.placement if placed else None
    key = ("layer", "gradcam")

    def drawn(device: torch.device) -> dict[int, Any]:
        on_device = [image.to(device) for image in images]
        chosen = {key: [0, 1]}
        return render_together({key: maps.to(device)}, on_device, options, chosen, placement)[key]

    on_cpu, on_gpu = drawn(CPU), drawn(gpu)
    for index in (0, 1):
        heatmaps = on_gpu[index].heatmaps.cpu().int() - on_cpu[index].heatmaps.int()
        overlays = on_gpu[index].require_overlays().cpu().int() - on_cpu[index].overlays.int()
        record(
            "rendering",
            placed=placed,
            image=index,
            heatmap_levels_off=int(heatmaps.abs().max()),
            heatmap_pixels_off=float((heatmaps != 0).float().mean()),
            overlay_levels_off=int(overlays.abs().max()),
        )
        assert int(heatmaps.abs().max()) <= 1
        assert int(overlays.abs().max()) <= 1


@pytest.fixture
def device_copies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[torch.dtype, int]]:
    """(dtype, elements) of every tensor copied from a GPU to the CPU by ``cpu()`` or ``to()``."""
    copies: list[tuple[torch.dtype, int]] = []
    to_cpu, to_any = torch.Tensor.cpu, torch.Tensor.to

    def cpu(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if tensor.device.type == "cuda":
            copies.append((tensor.dtype, tensor.numel()))
        return to_cpu(tensor, *args, **kwargs)

    def to(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        moved = to_any(tensor, *args, **kwargs)
        if tensor.device.type == "cuda" and moved.device.type == "cpu":
            copies.append((tensor.dtype, tensor.numel()))
        return moved

    monkeypatch.setattr(torch.Tensor, "cpu", cpu)
    monkeypatch.setattr(torch.Tensor, "to", to)
    return copies


def test_a_served_request_copies_only_uint8_images_off_the_device(
    cuda_only: torch.device, tmp_path: Path, device_copies: list[tuple[torch.dtype, int]]
) -> None:
    settings = make_settings(write_test_models(tmp_path), device=str(cuda_only))
    with TestClient(create_app(settings)) as client:
        wait_ready(client)
        device_copies.clear()  # loading and warming the models up copy what they like
        response = client.post(
            "/v1/explain",
            params={"model": "tiny", "method": "gradcam,layercam", "top_k": 2},
            content=photo_bytes(0, WIDTH, HEIGHT),
            headers={"content-type": "image/jpeg"},
        )
    assert response.status_code == 200
    full_size = WIDTH * HEIGHT
    large = [(dtype, count) for dtype, count in device_copies if count >= full_size]
    assert large, "the overlays and heatmaps should leave the device"
    assert {dtype for dtype, _ in large} == {torch.uint8}, large
