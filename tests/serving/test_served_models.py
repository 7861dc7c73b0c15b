"""``ModelHub`` and manifest selection: which models load, what the API may read meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest

from camserve.config import Settings
from camserve.engine.errors import InvalidTargetError, ManifestError, UnknownModelError
from camserve.serving.errors import ModelUnavailableError, NotReadyError
from camserve.serving.served_models import LoadState, ModelHub, find_spec, select_specs


def write_manifests(folder: Path) -> Path:
    """``b`` and ``a``: the demo architecture with random weights at 32×32 (quick to load);
    ``broken``: a checkpoint that does not exist."""
    for name in ("b", "a"):
        (folder / f"{name}.toml").write_text(
            f'name = "{name}"\narchitecture = "shapes_resnet"\nweights = "random"\n'
            'input_size = 32\nlabels = ["circle", "square", "triangle", "star", "cross"]\n'
        )
    (folder / "broken.toml").write_text(
        'name = "broken"\narchitecture = "shapes_resnet"\nweights = "missing.pt"\n'
    )
    return folder


def hub_for(folder: Path, **overrides: object) -> ModelHub:
    settings: dict[str, object] = {"models_dir": folder, "device": "cpu", **overrides}
    return ModelHub(Settings(_env_file=None, **settings))  # type: ignore[call-arg]


def test_select_specs_keeps_the_order_asked_for(tmp_path: Path) -> None:
    folder = write_manifests(tmp_path)
    assert [spec.name for spec in select_specs(folder, ["b", "a"])] == ["b", "a"]
    assert [spec.name for spec in select_specs(folder, [])] == ["a", "b", "broken"]
    assert find_spec(folder, "b").name == "b"


def test_select_specs_names_what_is_missing_and_what_there_is(tmp_path: Path) -> None:
    folder = write_manifests(tmp_path)
    with pytest.raises(ManifestError) as caught:
        select_specs(folder, ["a", "x", "y"])
    assert str(caught.value) == f"no model 'x', 'y' in {folder} (available: a, b, broken)"


def test_loading_serves_what_loads_and_reports_what_fails(tmp_path: Path) -> None:
    hub = hub_for(write_manifests(tmp_path))
    assert hub.snapshot().states == dict.fromkeys(["a", "b", "broken"], LoadState.LOADING)
    assert not hub.ready
    engines = hub.load_all()
    assert sorted(engines) == ["a", "b"]
    snapshot = hub.snapshot()
    assert snapshot.states == {
        "a": LoadState.READY,
        "b": LoadState.READY,
        "broken": LoadState.FAILED,
    }
    assert [model.name for model in snapshot.models] == ["a", "b"]
    assert list(snapshot.failures) == ["broken"]
    assert "missing.pt" in snapshot.failures["broken"]
    assert hub.ready
    a = hub.get("a")
    assert (a.architecture, a.num_classes, a.input_size, a.device) == (
        "shapes_resnet",
        5,
        (32, 32),
        "cpu",
    )
    assert a.layer == engines["a"].layer
    assert a.layer in a.layer_names


def test_get_waits_for_loading_then_defaults_to_the_first_model(tmp_path: Path) -> None:
    hub = hub_for(write_manifests(tmp_path))
    with pytest.raises(NotReadyError, match="still loading"):
        hub.get(None)
    hub.load_all()
    assert hub.get(None).name == "a"
    configured = hub_for(tmp_path, default_model="b")
    configured.load_all()
    assert configured.get(None).name == "b"


@pytest.mark.parametrize(
    ("settings", "default", "listed"),
    [
        ({}, "a", ["a", "b"]),
        ({"models": ["b", "a"]}, "b", ["b", "a"]),
        ({"models": ["broken", "b", "a"]}, "b", ["b", "a"]),
        ({"default_model": "b"}, "b", ["b", "a"]),
        ({"models": ["a", "b"], "default_model": "b"}, "b", ["b", "a"]),
    ],
)
def test_the_default_model_is_the_setting_else_the_first_named_else_the_first_by_name(
    tmp_path: Path, settings: dict[str, object], default: str, listed: list[str]
) -> None:
    """One rule: CAMSERVE_DEFAULT_MODEL; else the first model of CAMSERVE_MODELS that serves,
    in the operator's order; else the first in name order. The snapshot lists the default
    first, the others in the same order."""
    hub = hub_for(write_manifests(tmp_path), **settings)
    hub.load_all()
    snapshot = hub.snapshot()
    assert snapshot.default_model == default
    assert hub.get(None).name == default
    assert [model.name for model in snapshot.models] == listed


def test_the_default_model_does_not_follow_the_order_models_were_loaded_in(
    tmp_path: Path,
) -> None:
    """A model unloaded and loaded again (model control) comes back as the default it was."""
    hub = hub_for(write_manifests(tmp_path))
    hub.load_all()
    served = hub.get("a")
    hub.withdraw("a", forget=False)
    assert hub.get(None).name == "b"
    hub.publish(served)
    assert hub.get(None).name == "a"
    assert [model.name for model in hub.snapshot().models] == ["a", "b"]


def test_get_explains_an_unknown_or_failed_model(tmp_path: Path) -> None:
    hub = hub_for(write_manifests(tmp_path))
    hub.load_all()
    with pytest.raises(UnknownModelError) as unknown:
        hub.get("nope")
    assert str(unknown.value) == "unknown model 'nope'; served models: a, b"
    with pytest.raises(ModelUnavailableError) as unavailable:
        hub.get("broken")
    assert not isinstance(unavailable.value, UnknownModelError)
    reason = hub.failures["broken"].removeprefix("model 'broken': ")
    assert "missing.pt" in reason
    assert str(unavailable.value) == (
        f"model 'broken' is configured but failed to load: {reason}; served models: a, b"
    )


def test_a_snapshot_is_a_copy(tmp_path: Path) -> None:
    hub = hub_for(write_manifests(tmp_path))
    before = hub.snapshot()
    hub.load_all()
    assert before.models == []
    assert set(before.states.values()) == {LoadState.LOADING}
    assert before.failures == {}


def test_abandoned_loading_is_over_reported_and_not_ready(tmp_path: Path) -> None:
    hub = hub_for(write_manifests(tmp_path))
    hub.abandon(OSError("disk gone"))
    assert hub.finished.is_set()
    assert not hub.ready
    assert hub.snapshot().failures == {"(all)": "OSError: disk gone"}
    with pytest.raises(NotReadyError, match="no model could be loaded"):
        hub.get(None)


def test_an_unusable_precision_fails_every_model(tmp_path: Path) -> None:
    hub = hub_for(write_manifests(tmp_path), autocast="bf16")  # reduced precision: CUDA only
    assert hub.load_all() == {}
    snapshot = hub.snapshot()
    assert set(snapshot.states.values()) == {LoadState.FAILED}
    assert all("only supported on CUDA" in message for message in snapshot.failures.values())
    assert hub.finished.is_set()


def test_class_index_accepts_labels_and_refuses_out_of_range(tmp_path: Path) -> None:
    hub = hub_for(write_manifests(tmp_path), models=["a"])
    hub.load_all()
    model = hub.get("a")
    assert model.class_index("star") == 3
    assert model.class_index("4") == 4
    with pytest.raises(InvalidTargetError, match=r"out of range.*0-4"):
        model.class_index("5")


def test_a_manifest_with_fusion_layers_serves_fused_as_its_default_layer(tmp_path: Path) -> None:
    for name, layers in (("fusing", '["layer3", "layer4"]'), ("typo", '["layer3", "layer9"]')):
        (tmp_path / f"{name}.toml").write_text(
            f'name = "{name}"\narchitecture = "shapes_resnet"\nweights = "random"\n'
            f"input_size = 32\nfusion_layers = {layers}\n"
        )
    hub = hub_for(tmp_path)
    engines = hub.load_all()
    assert engines["fusing"].fusion_layers == ("layer3", "layer4")
    served = hub.get("fusing")
    assert served.layer == "fused"
    assert served.candidate_layers[0] == "fused"
    assert {"fused", "layer3", "layer4"} <= served.layer_names
    snapshot = hub.snapshot()
    assert snapshot.states["typo"] == LoadState.FAILED
    assert "layer9" in snapshot.failures["typo"]


def test_a_manifest_names_the_default_method_and_an_unknown_one_fails_its_model(
    tmp_path: Path,
) -> None:
    for name, method in (("layered", "LayerCAM"), ("plain", None), ("wrong", "bestcam")):
        line = f'method = "{method}"\n' if method else ""
        (tmp_path / f"{name}.toml").write_text(
            f'name = "{name}"\narchitecture = "shapes_resnet"\nweights = "random"\n'
            f"input_size = 32\n{line}"
        )
    hub = hub_for(tmp_path)
    hub.load_all()
    assert hub.get("layered").method == "layercam"
    assert hub.get("plain").method == "gradcam"
    assert "bestcam" in hub.snapshot().failures["wrong"]


def write_broken_manifests(folder: Path) -> dict[str, str]:
    """Two manifests with schema errors beside ``write_manifests``' models; the name each is
    reported under, and a part of its reason."""
    (folder / "typo.toml").write_text(
        'name = "typo"\narchitecture = "shapes_resnet"\nweigths = "random"\n'
    )
    (folder / "half.toml").write_text('name = "half"\narchitecture = [\n')
    return {
        "typo": "unknown field 'weigths' (did you mean 'weights'?)",
        "half": "invalid TOML",
    }


def test_manifests_that_cannot_be_read_fail_alone_and_all_are_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reasons = write_broken_manifests(write_manifests(tmp_path))
    with caplog.at_level("ERROR", logger="camserve.serving.served_models"):
        hub = hub_for(tmp_path)
    before = hub.snapshot()
    assert before.states["typo"] is LoadState.FAILED
    assert before.states["half"] is LoadState.FAILED
    assert before.states["a"] is LoadState.LOADING

    hub.load_all()

    snapshot = hub.snapshot()
    assert [model.name for model in snapshot.models] == ["a", "b"]
    assert sorted(snapshot.failures) == ["broken", "half", "typo"]
    for name, reason in reasons.items():
        assert snapshot.failures[name].startswith(f"{tmp_path / name}.toml: ")
        assert reason in snapshot.failures[name]
        assert any(
            record.getMessage() == f"model {name} not served: {snapshot.failures[name]}"
            for record in caplog.records
        )
    with pytest.raises(ModelUnavailableError, match="unknown field 'weigths'"):
        hub.get("typo")


def test_a_named_manifest_that_cannot_be_read_fails_while_the_others_serve(
    tmp_path: Path,
) -> None:
    write_broken_manifests(write_manifests(tmp_path))
    hub = hub_for(tmp_path, models=["typo", "b"])
    hub.load_all()
    snapshot = hub.snapshot()
    assert [model.name for model in snapshot.models] == ["b"]
    assert list(snapshot.failures) == ["typo"]
    with pytest.raises(ManifestError, match="unknown field 'weigths'"):
        find_spec(tmp_path, "typo")


def test_a_missing_name_is_told_with_the_manifests_that_cannot_be_read(tmp_path: Path) -> None:
    write_manifests(tmp_path)
    (tmp_path / "half.toml").write_text("name = [\n")
    with pytest.raises(ManifestError) as caught:
        select_specs(tmp_path, ["x"])
    assert str(caught.value).startswith(
        f"no model 'x' in {tmp_path} (available: a, b, broken; cannot be read: "
        f"{tmp_path / 'half.toml'}: invalid TOML"
    )


def test_a_folder_holding_no_manifest_is_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text("import torch\n")
    with pytest.raises(ManifestError, match=f"the models folder {tmp_path} holds no model"):
        hub_for(tmp_path)
