"""A manifest of each source (torchvision checkpoint, timm ViT, Hugging Face folder) served by a
real ``camserve serve`` on 127.0.0.1: ``/v1/explain`` answers with the maps the engine computes
in-process for the same manifest and image."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch
from safetensors.torch import save_file
from torchvision.models import resnet18

from camserve.engine.engine import CamEngine
from camserve.engine.images.imaging import decode_image
from camserve.engine.models.manifest import load_manifest
from camserve.engine.models.registry import load_model
from tests.engine.source_models import save_hf_folder, tiny_hf_vit
from tests.integration.live import LiveServer, live_server
from tests.support import image_bytes

pytestmark = pytest.mark.slow

LOAD_TIMEOUT_S = 240.0
"""Importing timm and transformers and warming three models takes a while on a busy machine."""

MANIFESTS = {
    "tv": 'name = "tv"\narchitecture = "resnet18"\nweights = "resnet18.safetensors"\n'
    "num_classes = 3\ninput_size = 64\n",
    "timm-vit": 'name = "timm-vit"\nsource = "timm"\narchitecture = "vit_tiny_patch16_224"\n'
    'weights = "random"\nnum_classes = 4\n',
    "hf-vit": 'name = "hf-vit"\nsource = "huggingface"\narchitecture = "HF-ViT"\n',
}


@pytest.fixture(scope="module")
def sources_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("source-models")
    torch.manual_seed(11)
    save_file(resnet18(num_classes=3).state_dict(), str(folder / "resnet18.safetensors"))
    save_hf_folder(tiny_hf_vit(), folder / "HF-ViT")
    for name, text in MANIFESTS.items():
        (folder / f"{name}.toml").write_text(text)
    return folder


@pytest.fixture(scope="module")
def server(sources_dir: Path, work_dir: Path) -> Iterator[LiveServer]:
    with live_server(sources_dir, work_dir, wait_for=None) as running:
        running.wait_until_ok("/readyz", timeout_s=LOAD_TIMEOUT_S)
        yield running


@pytest.mark.parametrize("name", list(MANIFESTS))
def test_served_maps_equal_the_in_process_engine(
    server: LiveServer, sources_dir: Path, name: str
) -> None:
    data = image_bytes(72, 48, seed=4)
    response = httpx.post(
        server.url("/v1/explain"),
        params={"model": name, "method": "gradcam,eigencam", "top_k": "2", "include": "raw_map"},
        content=data,
        headers={"Content-Type": "image/png"},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    engine = CamEngine.from_loaded(load_model(load_manifest(sources_dir / f"{name}.toml")))
    assert body["layer"] == engine.layer
    picture = decode_image(data).pixels
    # Grad-CAM for each of the two classes; Eigen-CAM once, since it does not depend on the class
    assert [(e["method"], e["class_agnostic"]) for e in body["explanations"]] == [
        ("gradcam", False),
        ("gradcam", False),
        ("eigencam", True),
    ]
    for entry in body["explanations"]:
        cams = engine.explain([picture], entry["method"], top_k=2).cams
        rank = entry["rank"] - 1
        assert entry["class_index"] == int(cams.targets[0, rank])
        served = torch.tensor(entry["raw_map"])
        ours = cams.layer_maps[0, rank]
        assert served.shape == ours.shape
        assert float(ours.std()) > 0.01
        assert float((served - ours).abs().max()) <= 1e-5, (name, entry["method"])
