"""timm and Hugging Face models through the manifest: loading, weights, labels, preprocessing,
default and candidate layers, and the errors a user meets (missing extra, unknown name,
weights not in the cache). Random weights built offline, saved into temporary folders."""

from __future__ import annotations

import sys
from pathlib import Path

import huggingface_hub.constants
import numpy as np
import pytest
import timm
import torch
from PIL import Image
from safetensors.torch import save_file
from torchvision.transforms.functional import pil_to_tensor
from transformers import ViTImageProcessor

from camserve.engine.engine import CamEngine
from camserve.engine.errors import (
    ManifestError,
    MethodNotApplicableError,
    UnknownArchitectureError,
    UnknownLayerError,
    WeightsUnavailableError,
)
from camserve.engine.models.manifest import load_manifest
from camserve.engine.models.registry import LoadedModel, load_model
from tests.engine.source_models import (
    HF_LABELS,
    save_hf_folder,
    tiny_hf_resnet,
    tiny_hf_vit,
)
from tests.tolerances import NETWORK, assert_float32_close

TIMM_VIT = "vit_tiny_patch16_224"


@pytest.fixture
def offline_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache and the hub client in offline mode."""
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(home / "hub"))
    return home


def load(folder: Path, text: str) -> LoadedModel:
    path = folder / "model.toml"
    path.write_text(text)
    return load_model(load_manifest(path))


def image(size: tuple[int, int] = (45, 70), seed: int = 3) -> Image.Image:
    pixels = np.random.default_rng(seed).integers(0, 256, (*size, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


# ---------------------------------------------------------------------------- timm


def test_timm_vit_takes_preprocessing_layer_and_candidates_from_the_model(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        f'name = "vit"\nsource = "timm"\narchitecture = "{TIMM_VIT}"\n'
        'weights = "random"\nnum_classes = 4\n',
    )
    assert loaded.layer == "blocks.11.norm1"
    assert loaded.preprocessing.input_size == (224, 224)
    assert loaded.preprocessing.interpolation == "bicubic"
    assert loaded.preprocessing.mean == (0.5, 0.5, 0.5)
    assert loaded.labels == ["class_0", "class_1", "class_2", "class_3"]
    engine = CamEngine.from_loaded(loaded, device="cpu")
    candidates = engine.candidate_layers
    assert [f"blocks.{index}" for index in range(11)] == [
        name for name in candidates if name.startswith("blocks.")
    ]
    assert "blocks.11" not in candidates  # the class token never reads its patch tokens
    assert "norm" not in candidates


def test_manifest_values_override_the_source(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        'name = "cnn"\nsource = "timm"\narchitecture = "resnet18"\n'
        'weights = "random"\nnum_classes = 3\ninput_size = 96\nmean = [0.1, 0.2, 0.3]\n'
        'interpolation = "bilinear"\nlabels = ["a", "b", "c"]\n',
    )
    assert loaded.layer == "layer4"
    assert loaded.preprocessing.input_size == (96, 96)
    assert loaded.preprocessing.mean == (0.1, 0.2, 0.3)
    assert loaded.preprocessing.std == (0.229, 0.224, 0.225)  # timm's, for resnet18
    assert loaded.preprocessing.interpolation == "bilinear"
    assert loaded.labels == ["a", "b", "c"]


def test_timm_safetensors_checkpoint_is_loaded(tmp_path: Path) -> None:
    torch.manual_seed(5)
    trained = timm.create_model("resnet18", pretrained=False, num_classes=3).eval()
    save_file(trained.state_dict(), str(tmp_path / "resnet.safetensors"))
    loaded = load(
        tmp_path,
        'name = "cnn"\nsource = "timm"\narchitecture = "resnet18"\n'
        'weights = "resnet.safetensors"\nnum_classes = 3\ninput_size = 64\n',
    )
    probe = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(loaded.module(probe), trained(probe))
    assert "resnet.safetensors" in loaded.weights


def test_unknown_timm_name_lists_close_matches(tmp_path: Path) -> None:
    with pytest.raises(UnknownArchitectureError, match=r"close matches: .*vit_small_patch16_224"):
        load(
            tmp_path,
            'name = "x"\nsource = "timm"\narchitecture = "vit_smal_patch16_224"\n'
            'weights = "random"\n',
        )


def test_unknown_timm_weights_tag_lists_the_model_tags(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"augreg_in21k_ft_in1k"):
        load(
            tmp_path,
            'name = "x"\nsource = "timm"\narchitecture = "vit_small_patch16_224"\n'
            'weights = "nonsense_tag"\n',
        )


def test_timm_pretrained_weights_offline_say_how_to_fetch(
    tmp_path: Path, offline_hub: Path
) -> None:
    with pytest.raises(WeightsUnavailableError, match=r"camserve fetch-weights cnn.*HF_HOME"):
        load(tmp_path, 'name = "cnn"\nsource = "timm"\narchitecture = "resnet18"\n')


@pytest.mark.parametrize(
    ("source", "package", "extra"),
    [
        ("timm", "timm", "camserve[timm]"),
        ("huggingface", "transformers", "camserve[huggingface]"),
    ],
)
def test_missing_extra_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, package: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, package, None)  # import now raises ImportError
    with pytest.raises(
        ManifestError, match=rf"pip install '{extra.replace('[', '.').replace(']', '.')}'"
    ):
        load(
            tmp_path,
            f'name = "x"\nsource = "{source}"\narchitecture = "resnet18"\nweights = "random"\n',
        )


# ---------------------------------------------------------------------------- Hugging Face


def test_huggingface_folder_brings_labels_preprocessing_and_weights(tmp_path: Path) -> None:
    torch.manual_seed(7)
    model = tiny_hf_vit()
    save_hf_folder(model, tmp_path / "My-ViT")
    loaded = load(tmp_path, 'name = "hf"\nsource = "huggingface"\narchitecture = "My-ViT"\n')
    assert loaded.labels == HF_LABELS
    assert loaded.layer == "vit.layers.1.layernorm_before"
    assert loaded.preprocessing.input_size == (32, 32)
    assert loaded.preprocessing.mean == (0.5, 0.5, 0.5)
    assert loaded.preprocessing.interpolation == "bilinear"
    probe = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert_float32_close(loaded.module(probe).logits, model(probe).logits, NETWORK)


def test_huggingface_checkpoint_and_random_weights_use_the_folder_config(tmp_path: Path) -> None:
    torch.manual_seed(8)
    model = tiny_hf_resnet()
    save_hf_folder(model, tmp_path / "resnet")
    save_file(model.state_dict(), str(tmp_path / "retrained.safetensors"))
    loaded = load(
        tmp_path,
        'name = "hf"\nsource = "huggingface"\narchitecture = "resnet"\n'
        'weights = "retrained.safetensors"\n',
    )
    probe = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert_float32_close(loaded.module(probe).logits, model(probe).logits, NETWORK)
    assert loaded.layer == "resnet.encoder.stages.3"
    fresh = load(
        tmp_path,
        'name = "hf"\nsource = "huggingface"\narchitecture = "resnet"\nweights = "random"\n',
    )
    with torch.no_grad():
        assert not torch.equal(fresh.module(probe).logits, model(probe).logits)


def test_huggingface_hub_model_offline_says_how_to_fetch(tmp_path: Path, offline_hub: Path) -> None:
    with pytest.raises(WeightsUnavailableError, match=r"camserve fetch-weights hf"):
        load(
            tmp_path,
            'name = "hf"\nsource = "huggingface"\narchitecture = "google/vit-base-patch16-224"\n',
        )


# ---------------------------------------------------------------------------- 422s


def test_cam_works_on_pooled_heads_and_is_refused_on_a_class_token(tmp_path: Path) -> None:
    torch.manual_seed(9)
    save_hf_folder(tiny_hf_resnet(), tmp_path / "resnet")
    resnet = CamEngine.from_loaded(
        load(tmp_path, 'name = "r"\nsource = "huggingface"\narchitecture = "resnet"\n'),
        device="cpu",
    )
    images = torch.randn(2, 3, 64, 64)
    cam = resnet.compute(images, "cam", targets=[1, 2]).layer_maps
    gradcam = resnet.compute(images, "gradcam", targets=[1, 2]).layer_maps
    assert float(cam.std()) > 0.05
    assert_float32_close(cam, gradcam, NETWORK)  # GAP + linear: CAM is Grad-CAM
    save_hf_folder(tiny_hf_vit(), tmp_path / "vit")
    vit = CamEngine.from_loaded(
        load(tmp_path, 'name = "v"\nsource = "huggingface"\narchitecture = "vit"\n'),
        device="cpu",
    )
    with pytest.raises(MethodNotApplicableError, match="class token"):
        vit.compute(torch.randn(1, 3, 32, 32), "cam")


def test_flat_gradient_layer_is_refused_naming_the_default(tmp_path: Path) -> None:
    torch.manual_seed(10)
    save_hf_folder(tiny_hf_vit(), tmp_path / "vit")
    engine = CamEngine.from_loaded(
        load(tmp_path, 'name = "v"\nsource = "huggingface"\narchitecture = "vit"\n'),
        device="cpu",
    )
    images = torch.randn(1, 3, 32, 32)
    assert float(engine.compute(images, "gradcam").layer_maps.std()) > 0.05
    for layer in ("vit.layers.1.layernorm_after", "vit.layers.1"):
        with pytest.raises(UnknownLayerError, match=r"zero.*use 'vit.layers.1.layernorm_before'"):
            engine.compute(images, "gradcam", layer=layer)
    with pytest.raises(
        UnknownLayerError, match=r"outputs \(1, 5\).*'vit.layers.1.layernorm_before'"
    ):
        engine.compute(images, "gradcam", layer="classifier")
    assert engine.compute(images, "eigencam", layer="vit.layers.1").layer_maps.shape == (1, 1, 4, 4)


# ---------------------------------------------------------------------------- preprocessing


def test_timm_preprocessing_equals_timm_transform(tmp_path: Path) -> None:
    """timm's own eval transform, with its crop turned off (camserve resizes the whole image),
    on the same picture as a float tensor: same size, filter, mean and std."""
    loaded = load(
        tmp_path,
        f'name = "vit"\nsource = "timm"\narchitecture = "{TIMM_VIT}"\nweights = "random"\n',
    )
    config = timm.data.resolve_model_data_config(loaded.module)
    transform = timm.data.create_transform(**{**config, "crop_pct": 1.0, "crop_mode": "squash"})
    picture = image()
    theirs = transform(pil_to_tensor(picture).float().div(255))
    ours = loaded.preprocessing([pil_to_tensor(picture)], torch.device("cpu"))[0]
    assert ours.shape == theirs.shape == (3, 224, 224)
    assert float((ours - theirs).abs().max()) <= 1e-5


def test_huggingface_preprocessing_equals_the_image_processor(tmp_path: Path) -> None:
    """The folder's ViTImageProcessor: same size, filter, mean and std; it resizes 8-bit images
    (rounding to whole levels) where camserve resizes in float, hence one level of tolerance."""
    save_hf_folder(tiny_hf_vit(), tmp_path / "vit")
    loaded = load(tmp_path, 'name = "v"\nsource = "huggingface"\narchitecture = "vit"\n')
    processor = ViTImageProcessor.from_pretrained(tmp_path / "vit")
    picture = image()
    theirs = processor(images=picture, return_tensors="pt")["pixel_values"][0]
    ours = loaded.preprocessing([pil_to_tensor(picture)], torch.device("cpu"))[0]
    assert ours.shape == theirs.shape == (3, 32, 32)
    one_level = 1 / 255 / min(loaded.preprocessing.std)
    assert float((ours - theirs).abs().max()) <= one_level
