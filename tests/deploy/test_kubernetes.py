"""The Kubernetes manifests in ``deploy/kubernetes``, validated offline.

The plain manifests against Kubernetes' own schemas (kubernetes-validate, strict: unknown
fields refused); the RayService against KubeRay's CRD schema vendored next to it, and its pod
templates against Kubernetes' ``PodTemplateSpec``; the InferenceService's container against
Kubernetes' ``Pod``. Then what each must say: probes, GPU, non-root, Serve config, ports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from camserve.cluster.ray_app import RayAppArgs
from tests.harness.ray_cluster import THROUGHPUT_MODE

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.33"
PLAIN = ["deployment.yaml", "service.yaml", "hpa.yaml", "pdb.yaml"]


def load(name: str) -> dict[str, Any]:
    document = yaml.safe_load((FOLDER / name).read_text())
    assert isinstance(document, dict)
    return document


def validate(resource: dict[str, Any]) -> None:
    kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)


def container_environment(container: dict[str, Any]) -> dict[str, str]:
    """A container's ``env`` list as a mapping of names to values."""
    return {item["name"]: item["value"] for item in container["env"]}


def as_pod_template(template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "t"},
        "template": template,
    }


@pytest.mark.parametrize("name", PLAIN)
def test_plain_manifests_validate(name: str) -> None:
    validate(load(name))


def test_validation_catches_mistakes() -> None:
    """The checks are real: a misspelt field and a wrong type are refused."""
    deployment = load("deployment.yaml")
    deployment["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)
    service = load("service.yaml")
    service["spec"]["ports"][0]["port"] = "eighty"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(service)


def test_the_deployment_runs_one_non_root_camserve_per_gpu_with_probes() -> None:
    pod = load("deployment.yaml")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["resources"]["requests"]["memory"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] >= 1000
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    environment = {item["name"]: item for item in container["env"]}
    assert environment["CAMSERVE_DEVICE"]["value"] == "cuda"
    assert environment["CAMSERVE_API_KEY"]["valueFrom"]["secretKeyRef"]["optional"] is True
    timeout = float(environment["CAMSERVE_REQUEST_TIMEOUT_S"]["value"])
    assert pod["terminationGracePeriodSeconds"] > timeout


def test_service_hpa_and_pdb_point_at_the_deployment() -> None:
    labels = load("deployment.yaml")["spec"]["template"]["metadata"]["labels"]
    assert load("service.yaml")["spec"]["selector"].items() <= labels.items()
    assert load("pdb.yaml")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    target = load("hpa.yaml")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", "camserve")


# ---------------------------------------------------------------- RayService


def rayservice_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((FOLDER / "schemas" / "rayservice-v1.json").read_text())
    return schema


def test_the_rayservice_validates_against_kuberays_schema() -> None:
    service = load("rayservice.yaml")
    assert (service["apiVersion"], service["kind"]) == ("ray.io/v1", "RayService")
    jsonschema.validate(service, rayservice_schema())
    cluster = service["spec"]["rayClusterConfig"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        validate(as_pod_template(group["template"]))


def test_the_vendored_schema_catches_mistakes() -> None:
    service = load("rayservice.yaml")
    service["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["maxReplica"] = 4
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(service, rayservice_schema())
    service = load("rayservice.yaml")
    del service["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(service, rayservice_schema())


def test_the_rayservice_embeds_the_serve_config_of_deploy_ray() -> None:
    embedded = yaml.safe_load(load("rayservice.yaml")["spec"]["serveConfigV2"])
    shipped = yaml.safe_load((ROOT / "deploy" / "ray" / "serve.yaml").read_text())
    assert embedded["applications"] == shipped["applications"]
    (application,) = embedded["applications"]
    args = RayAppArgs.model_validate(application["args"])
    assert args.num_gpus == 1


def test_gpu_workers_and_a_head_that_runs_no_replica() -> None:
    cluster = load("rayservice.yaml")["spec"]["rayClusterConfig"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    (workers,) = cluster["workerGroupSpecs"]
    (container,) = workers["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert workers["minReplicas"] <= workers["replicas"] <= workers["maxReplicas"]
    assert cluster["enableInTreeAutoscaling"] is True


def test_every_ray_container_runs_serves_throughput_mode_as_the_tests_do() -> None:
    cluster = load("rayservice.yaml")["spec"]["rayClusterConfig"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        (container,) = group["template"]["spec"]["containers"]
        environment = container_environment(container)
        assert environment == THROUGHPUT_MODE


def test_the_vendored_schema_names_its_source_and_licence() -> None:
    notice = (FOLDER / "schemas" / "KUBERAY-NOTICE.md").read_text()
    assert "ray-project/kuberay" in notice
    assert "Apache License 2.0" in notice
    assert "ray.io_rayservices.yaml" in rayservice_schema()["$comment"]


# ---------------------------------------------------------------- InferenceService


def test_the_inferenceservice_runs_camserve_as_a_custom_predictor() -> None:
    service = load("inferenceservice.yaml")
    assert (service["apiVersion"], service["kind"]) == (
        "serving.kserve.io/v1beta1",
        "InferenceService",
    )
    (container,) = service["spec"]["predictor"]["containers"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [container]},
    }
    validate(pod)
    environment = container_environment(container)
    assert environment["STORAGE_URI"]
    assert environment["CAMSERVE_MODELS_DIR"] == "/mnt/models"
    assert container["ports"][0]["containerPort"] == int(environment["CAMSERVE_PORT"]) == 8080
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
