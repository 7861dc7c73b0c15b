"""Every compose file validates against the Compose Specification JSON schema (the copy that
check-jsonschema ships), and says what the deployment needs: GPU reservation, volumes,
healthcheck, restart policy, the CPU override, the Label Studio profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import check_jsonschema
import jsonschema
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILES = sorted(ROOT.glob("docker-compose*.yml"))
SCHEMA = Path(check_jsonschema.__file__).parent / "builtin_schemas" / "vendor" / "compose-spec.json"


class ComposeLoader(yaml.SafeLoader):
    """YAML with Compose's merge tags: ``!reset`` and ``!override`` keep their plain value."""


def _plain(loader: yaml.SafeLoader, _suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node) if node.value not in ("null", "~", "") else None
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]


ComposeLoader.add_multi_constructor("!", _plain)


def load(path: Path) -> dict[str, Any]:
    document = yaml.load(path.read_text(), Loader=ComposeLoader)
    assert isinstance(document, dict)
    return document


def test_there_is_a_main_file_and_a_cpu_override() -> None:
    names = [path.name for path in COMPOSE_FILES]
    assert names == ["docker-compose.cpu.yml", "docker-compose.yml"]


def validator() -> jsonschema.protocols.Validator:
    """A validator for the schema's own draft (2020-12), after checking the schema itself."""
    schema = json.loads(SCHEMA.read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda path: path.name)
def test_compose_file_matches_the_compose_specification(path: Path) -> None:
    errors = list(validator().iter_errors(load(path)))
    assert not errors, [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors]


def test_the_schema_rejects_what_compose_would_reject() -> None:
    """The check is real: a misspelt key and a wrong type are caught."""
    validator_ = validator()
    assert "2020-12" in validator_.schema["$schema"]
    assert list(validator_.iter_errors({"services": {"x": {"restart_policy": "always"}}}))
    assert list(validator_.iter_errors({"services": {"x": {"ports": "8000:8000"}}}))


def test_the_gpu_service_is_complete() -> None:
    service = load(ROOT / "docker-compose.yml")["services"]["camserve"]
    (device,) = service["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia"
    assert device["capabilities"] == ["gpu"]
    assert service["build"]["args"]["VARIANT"] == "cuda"
    assert any(volume.startswith("./models:/srv/camserve/models") for volume in service["volumes"])
    assert "torch-cache:/var/cache/camserve/torch" in service["volumes"]
    assert service["healthcheck"]["test"] == ["CMD", "python", "-m", "camserve.serving.healthcheck"]
    assert service["restart"] == "unless-stopped"
    assert service["ports"][0].endswith(":8000")


def test_the_cpu_override_drops_the_gpu_and_builds_the_cpu_variant() -> None:
    text = (ROOT / "docker-compose.cpu.yml").read_text()
    assert "deploy: !reset null" in text
    service = load(ROOT / "docker-compose.cpu.yml")["services"]["camserve"]
    assert service["deploy"] is None
    assert service["build"]["args"]["VARIANT"] == "cpu"
    assert service["environment"]["CAMSERVE_DEVICE"] == "cpu"


def test_label_studio_is_an_optional_profile() -> None:
    services = load(ROOT / "docker-compose.yml")["services"]
    assert services["label-studio"]["profiles"] == ["labeling"]
    assert "profiles" not in services["camserve"]


def test_camserve_reads_the_same_local_files_as_label_studio() -> None:
    services = load(ROOT / "docker-compose.yml")["services"]
    camserve, studio = services["camserve"], services["label-studio"]

    def mounts(service: dict[str, Any]) -> dict[str, str]:
        pairs = (volume.split(":")[:2] for volume in service["volumes"])
        return {target: source for source, target in pairs}

    root = camserve["environment"]["LOCAL_FILES_DOCUMENT_ROOT"]
    studio_root = studio["environment"]["LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT"]
    assert mounts(camserve)[root] == mounts(studio)[studio_root]
    assert camserve["environment"]["LABEL_STUDIO_URL"].endswith("//label-studio:8080}")
    assert studio["ports"][0].endswith(":8080")
