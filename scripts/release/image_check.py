"""Build camserve's Docker image with a real container engine, run it, check it as a user would.

    python -m scripts.release.image_check [--variant cuda] [--base IMAGE]
                                          [--compose CMD | --no-compose] [--keep]

It runs on rootful podman (``apt-get install podman runc``), which runs containers on this kind
of machine with the overlay storage driver, runc, the host's network and a ``containers.conf``
that sets no ulimits, cgroupfs and runc (the script writes it and ``storage.conf``, and points
podman to them through the environment). Without ``--base`` it first makes a stand-in for
``python:3.11-slim-bookworm`` (no registry is reachable here): ``debootstrap`` of Debian bookworm
with Python 3.11 from the mirror in apt's own sources. pip inside the build uses this machine's
own pip configuration (``pip config list``: its index settings, local wheel folders, constraints
and CA bundle), mounted into the build for its ``RUN`` steps only.

The checks, in order, each printed as it passes (any failure stops the run with its reason):
the image builds (time, size); it starts with a mounted models folder and a mounted weights
cache; its own HEALTHCHECK reports healthy (time to healthy); ``/v1/cam`` and ``/v1/explain``
answer a sample photo with the default model, its labels and PNGs at the photo's size; the
process runs as uid 10001 and can write the cache but not the models folder; ``/v1/models``
lists exactly the mounted manifests; SIGTERM with requests in flight answers every one of them
and the container exits 0 within its grace period. Then ``docker-compose.yml`` with the CPU
override runs through podman-compose (the dev dependency; ``--no-compose`` skips it).
Everything it built is removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from camserve.web.routes import SAMPLES_DIR
from scripts.release.image_check_requests import (
    IN_FLIGHT,
    LONG_PASS,
    QUEUED_PASS,
    check_cam_and_explain,
    check_model_list,
    requests_behind_a_long_job,
)

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/camserve:check"
BASE_IMAGE = "localhost/camserve-base:bookworm"
CONTAINER = "camserve-check"
CONTAINERS_CONF = """[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
"""
STORAGE_CONF = """[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
"""
"""overlay, not vfs: vfs copies the whole file system at every layer (the 5 GB dependency layer
once per later step: the disk filled past 60 GB before the build ended); the kernel here mounts
overlay for rootful podman. Both files go to podman and podman-compose through the environment."""
MOUNTED_MODEL = "shapes_mounted"
COMPOSE_PROJECT = "camserve-check"
PORT = 18437
COMPOSE_PORT = 18438
GRACE_S = 40
HEALTHY_WITHIN_S = 300
INSTALL_LINE = "apt-get install podman runc debootstrap"
"""What docs/deploy.md has a user install for this check."""


def log(message: str) -> None:
    print(f"[image-check] {message}", flush=True)


def run(command: Sequence[str], *, check: bool = True, capture: bool = False) -> str:
    """Run ``command``; its output is returned when ``capture``, else it goes to the terminal."""
    result = subprocess.run(command, check=check, text=True, capture_output=capture)
    return result.stdout.strip() if capture else ""


def podman_command(*arguments: str) -> list[str]:
    return ["podman", *arguments]


def podman(*arguments: str, check: bool = True, capture: bool = False) -> str:
    return run(podman_command(*arguments), check=check, capture=capture)


def debian_mirror() -> str:
    """The first Debian mirror in apt's sources on this machine."""
    for source in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for line in source.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    raise SystemExit("no Debian mirror in /etc/apt/sources.list.d/*.sources")


def make_base_image(work: Path) -> str:
    """A Debian bookworm image with Python 3.11."""
    rootfs = work / "rootfs"
    log(f"making the base image {BASE_IMAGE} with debootstrap")
    run(
        [
            "debootstrap",
            "--variant=minbase",
            "--include=python3,python3-venv,python3-pip,python-is-python3,ca-certificates",
            "bookworm",
            str(rootfs),
            debian_mirror(),
        ]
    )
    with subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE) as tar:
        subprocess.run(
            podman_command(
                "import",
                "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "-", BASE_IMAGE,
            ),
            stdin=tar.stdout,
            check=True,
        )  # fmt: skip
    shutil.rmtree(rootfs)
    return BASE_IMAGE


def pip_settings() -> dict[str, str]:
    """This machine's pip configuration (its files and ``PIP_*`` variables), as ``pip config
    list`` reports it: the later of two sources of one setting wins, as in pip."""
    listed = run([sys.executable, "-m", "pip", "config", "list"], capture=True)
    settings = {}
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        settings[key.rpartition(".")[2]] = value.strip("'")
    return settings


def local_paths(value: str) -> list[str]:
    """The files and folders on this machine that a pip setting names: paths as they are, and
    for a file:// index the folder that holds it (its pages may link to files beside it)."""
    paths = []
    for word in value.split():
        if word.startswith("file://"):
            paths.append(str(Path(word.removeprefix("file://")).parent))
        elif word.startswith("/"):
            paths.append(word)
    return [path for path in paths if Path(path).exists()]


def pip_build_volumes(work: Path) -> list[str]:
    """``podman build`` options that hand this machine's pip configuration to the build: the
    settings as ``/etc/pip.conf`` and every local index, wheel folder, constraint file and CA
    bundle they name, mounted read-only at the same path. Nothing of it stays in the image."""
    settings = pip_settings()
    config = work / "pip.conf"
    config.write_text("[global]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
    mounts = {str(config): "/etc/pip.conf"}
    for value in settings.values():
        mounts.update((path, path) for path in local_paths(value))
    log(f"pip inside the build: {', '.join(f'{k}={v}' for k, v in settings.items())}")
    return [option for host, inside in mounts.items() for option in ("-v", f"{host}:{inside}:ro")]


def build_image(base: str, variant: str, work: Path) -> tuple[float, int]:
    """Build the image; returns the seconds it took and its size in bytes."""
    log(f"building {IMAGE} (VARIANT={variant}) on {base}")
    started = time.monotonic()
    podman(
        "build", "--format", "docker", "--network", "host", *pip_build_volumes(work),
        "--build-arg", f"PYTHON_IMAGE={base}", "--build-arg", f"VARIANT={variant}",
        "-t", IMAGE, str(ROOT),
    )  # fmt: skip
    seconds = time.monotonic() - started
    size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE, capture=True))
    log(f"built in {seconds:.0f} s, {size / 1e9:.2f} GB")
    check_version_label()
    return seconds, size


def check_version_label() -> None:
    """The image's version label, ``camserve --version`` inside it and the package agree."""
    version = (ROOT / "client" / "camserve_client" / "VERSION").read_text().strip()
    label_format = '{{index .Labels "org.opencontainers.image.version"}}'
    label = podman("image", "inspect", "--format", label_format, IMAGE, capture=True).strip()
    said = podman("run", "--rm", IMAGE, "camserve", "--version", capture=True).strip()
    if (label, said) != (version, f"camserve {version}"):
        raise SystemExit(f"label {label!r} and {said!r} disagree with the package's {version}")
    log(f"labelled and installed as camserve {version}")


def mounted_models(work: Path) -> Path:
    """The models folder to mount: the default model, and the demo model under a name the
    image's own models/ lacks, so that /v1/models shows the mount is what is served."""
    models = work / "models"
    models.mkdir()
    for name in ("efficientnet_lite0.toml", "shapes.pt"):
        shutil.copyfile(ROOT / "models" / name, models / name)
    manifest = (ROOT / "models" / "shapes.toml").read_text()
    renamed = manifest.replace('name = "shapes"', f'name = "{MOUNTED_MODEL}"')
    (models / f"{MOUNTED_MODEL}.toml").write_text(renamed)
    return models


def start_container(models: Path, cache: Path) -> None:
    """The image on the host's network with the models and the cache mounted. Its explanation
    reports are off: their background passes run whenever the queue is empty, so the stop
    check's requests would wait behind one and then run in one batch, never queued together."""
    podman(
        "run", "-d", "--name", CONTAINER, "--network", "host",
        "-e", "CAMSERVE_HOST=127.0.0.1", "-e", f"CAMSERVE_PORT={PORT}",
        "-e", "CAMSERVE_AUDIT=false",
        "-v", f"{models}:/srv/camserve/models:ro",
        "-v", f"{cache}:/var/cache/camserve/torch",
        IMAGE,
    )  # fmt: skip


def wait_healthy(container: str = CONTAINER) -> float:
    """Run the image's own HEALTHCHECK until it passes; the seconds it took."""
    started = time.monotonic()
    while time.monotonic() - started < HEALTHY_WITHIN_S:
        state = podman("inspect", "--format", "{{.State.Status}}", container, capture=True)
        if state != "running":
            podman("logs", container, check=False)
            raise SystemExit(f"the container stopped while starting ({state})")
        podman("healthcheck", "run", container, check=False, capture=True)
        health = podman("inspect", "--format", "{{.State.Health.Status}}", container, capture=True)
        if health == "healthy":
            return time.monotonic() - started
        time.sleep(2)
    podman("logs", container, check=False)
    raise SystemExit(f"not healthy within {HEALTHY_WITHIN_S} s")


def sample_photo() -> Path:
    """A real photo the default model knows (a cat), shipped as a page sample."""
    return SAMPLES_DIR / "photos" / "chelsea.jpg"


def check_user_and_mounts(container: str = CONTAINER) -> int:
    """The service runs as uid 10001, can fill the weights cache, cannot write the models."""
    uid = podman("exec", container, "id", "-u", capture=True)
    if uid != "10001":
        raise SystemExit(f"the service runs as uid {uid}, not 10001")
    podman("exec", container, "sh", "-c", 'touch "$TORCH_HOME/probe" && rm "$TORCH_HOME/probe"')
    denied = subprocess.run(
        podman_command("exec", container, "touch", "/srv/camserve/models/probe"),
        capture_output=True,
        check=False,
    )
    if denied.returncode == 0:
        raise SystemExit("the mounted models folder is writable from the container")
    log("runs as uid 10001; the weights cache is writable, the models folder read-only")
    return int(uid)


def stop_with(
    url: str, photo: Path, count: int, params: dict[str, str], allowed: set[str]
) -> dict[str, object]:
    """SIGTERM (``podman stop`` with the grace period of docker-compose.yml) while ``count``
    requests of ``params`` wait in the queue behind a long Score-CAM that still runs, as the
    server says (``requests_behind_a_long_job``). Every request must be answered with a status
    in ``allowed``, and the container exit with 0 inside the grace period; returns the
    statuses, the exit code and the stop's time."""
    with requests_behind_a_long_job(url, photo, count, params) as in_flight:
        started = time.monotonic()
        podman("stop", "-t", str(GRACE_S), CONTAINER)
        stopped_after = time.monotonic() - started
    code = podman("inspect", "--format", "{{.State.ExitCode}}", CONTAINER, capture=True)
    log(
        f"SIGTERM with {count} queued behind a running Score-CAM: {in_flight.summary()}; "
        f"exited {code} after {stopped_after:.1f} s"
    )
    if not in_flight.answered_with(allowed):
        raise SystemExit(f"a request in flight got no answer among {sorted(allowed)}")
    if code != "0" or stopped_after >= GRACE_S:
        raise SystemExit("the container exited non-zero or needed SIGKILL")
    return {
        "unanswered_at_sigterm": count,
        "statuses": in_flight.outcomes,
        "exit_code": int(code),
        "stopped_s": round(stopped_after, 1),
    }


def check_stops(photo: Path) -> dict[str, object]:
    """Two stops, each while a Score-CAM pass of seconds runs: with six short Score-CAMs queued
    behind it (each must be answered 200), and, started again, with a second pass as long
    queued (answered 200, or 504 should the load push it past its deadline; the process must
    not wait beyond its grace period nor crash on it)."""
    url = f"http://127.0.0.1:{PORT}"
    drained = stop_with(url, photo, IN_FLIGHT, QUEUED_PASS, allowed={"200"})
    podman("start", CONTAINER, capture=True)
    wait_healthy()
    running = stop_with(url, photo, 1, LONG_PASS, allowed={"200", "504"})
    return {"queued": drained, "long_pass": running}


def run_compose(work: Path, compose: str) -> dict[str, object]:
    """``docker-compose.yml`` with the CPU override, through podman-compose, on the image built
    here (tagged as the override's ``camserve:cpu``: the CPU wheels' index is not reachable)."""
    project = work / "compose"
    project.mkdir()
    for name in ("docker-compose.yml", "docker-compose.cpu.yml"):
        shutil.copyfile(ROOT / name, project / name)
    shutil.copytree(ROOT / "models", project / "models")
    (project / "labeling-files").mkdir()
    podman("tag", IMAGE, "localhost/camserve:cpu")
    command = [compose, "-p", COMPOSE_PROJECT, "-f", "docker-compose.yml"]
    command += ["-f", "docker-compose.cpu.yml"]
    env = {**os.environ, "CAMSERVE_PUBLISHED_PORT": str(COMPOSE_PORT)}
    subprocess.run(
        [*command, "up", "-d", "--no-build", "camserve"], cwd=project, env=env, check=True
    )
    try:
        project_label = f"label=com.docker.compose.project={COMPOSE_PROJECT}"
        container = podman("ps", "--format", "{{.Names}}", "--filter", project_label, capture=True)
        healthy_s = wait_healthy(container)
        url = f"http://127.0.0.1:{COMPOSE_PORT}"
        names = sorted(p.stem for p in (project / "models").glob("*.toml"))
        photo = sample_photo()
        result = {"healthy_s": round(healthy_s, 1), "models": check_model_list(url, names)}
        result["answers"] = check_cam_and_explain(url, photo)
        result["uid"] = check_user_and_mounts(container)
    finally:
        subprocess.run([*command, "down", "-v"], cwd=project, env=env, check=False)
    log(f"compose: healthy after {result['healthy_s']} s, {result['answers']}")
    return result


@contextmanager
def engine_environment() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="camserve-image-check-", dir="/var/tmp") as name:
        work = Path(name)
        (work / "containers.conf").write_text(CONTAINERS_CONF)
        (work / "storage.conf").write_text(STORAGE_CONF)
        os.environ["CONTAINERS_CONF"] = str(work / "containers.conf")
        os.environ["CONTAINERS_STORAGE_CONF"] = str(work / "storage.conf")
        yield work


def cleanup(keep: bool, made_base: bool) -> None:
    podman("rm", "-f", CONTAINER, check=False, capture=True)
    podman("rmi", "localhost/camserve:cpu", check=False, capture=True)
    if keep:
        return
    podman("rmi", "-f", IMAGE, check=False, capture=True)
    if made_base:
        podman("rmi", "-f", BASE_IMAGE, check=False, capture=True)
    podman("image", "prune", "-f", check=False, capture=True)


def missing_tools(made_base: bool) -> list[str]:
    """The programs this run needs that are not on PATH (debootstrap only to make the base)."""
    needed = ["podman", "runc"] + (["debootstrap"] if made_base else [])
    return [tool for tool in needed if shutil.which(tool) is None]


def require_tools(made_base: bool) -> None:
    """Stop with the install line of docs/deploy.md when a program this run needs is missing."""
    missing = missing_tools(made_base)
    if missing:
        raise SystemExit(
            f"image-check needs {', '.join(missing)}, not found on PATH; install with: "
            f"{INSTALL_LINE} (docs/deploy.md)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--base", help="the PYTHON_IMAGE to build on (default: made here)")
    parser.add_argument(
        "--compose",
        metavar="PODMAN_COMPOSE",
        default=str(Path(sys.executable).parent / "podman-compose"),
        help="the podman-compose that runs the Compose files (1.1 or newer: Debian's 1.0.3 "
        "cannot read the CPU override's !reset); default: the one of this environment",
    )
    parser.add_argument("--no-compose", action="store_true", help="skip the Compose check")
    parser.add_argument("--keep", action="store_true", help="keep the images afterwards")
    args = parser.parse_args(argv)
    require_tools(made_base=args.base is None)
    report: dict[str, object] = {"variant": args.variant}
    with engine_environment() as work:
        try:
            base = args.base or make_base_image(work)
            report["build_s"], report["size_bytes"] = build_image(base, args.variant, work)
            models, cache = mounted_models(work), work / "cache"
            cache.mkdir(mode=0o777)
            cache.chmod(0o777)
            start_container(models, cache)
            report["healthy_s"] = round(wait_healthy(), 1)
            log(f"healthy after {report['healthy_s']} s")
            url = f"http://127.0.0.1:{PORT}"
            report["models"] = check_model_list(url, sorted(p.stem for p in models.glob("*.toml")))
            photo = sample_photo()
            report["answers"] = check_cam_and_explain(url, photo)
            log(f"answers: {json.dumps(report['answers'])}")
            report["uid"] = check_user_and_mounts()
            report["sigterm"] = check_stops(photo)
            if not args.no_compose:
                report["compose"] = run_compose(work, args.compose)
        finally:
            cleanup(args.keep, made_base=args.base is None)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
