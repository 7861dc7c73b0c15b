"""``make wheel-check``: camserve as a user installs it, from its wheels, outside the clone.

The checks, in order, each printed as it passes (a failure stops the run with its reason):

1. ``pip wheel`` builds ``camserve`` and ``camserve-client`` from this tree; neither holds a
   top-level ``app``; the camserve wheel carries the shipped manifests and checkpoints, and no
   module of the lab (``lab/camserve_lab``: its own distribution, camserve-lab).
2. A fresh virtual environment outside the clone gets the camserve wheel with
   ``constraints.txt`` (its client wheel from the same folder); another gets only the client
   wheel, and torch cannot be imported there.
3. ``camserve --version``, both packages' metadata and the running server's ``/v2`` agree on
   the one version (``client/camserve_client/VERSION``).
4. ``camserve serve`` runs in an empty folder that holds nothing but an unrelated
   ``app/__init__.py`` (which stops any process that imports it): it says it serves the
   shipped models, and the client, from the torch-free environment and the same folder,
   lists them and gets a classifier's explanation and a CAM from the demo model; the Label
   Studio backend's ``/labelstudio/predict`` labels the cat photo (issue #52: without
   label-studio-sdk, which the wheel did not install, it answered 500).
5. The installed sizes of both environments are printed.

Everything is built in a temporary folder, removed at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import httpx

from camserve.cli.missing_extras import LAB_INSTALL
from camserve.web.routes import SAMPLES_DIR
from tests.harness.live_server import LOOPBACK, ServerProcess, running, start_server

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "lab" / "camserve_lab"
VERSION = (ROOT / "client" / "camserve_client" / "VERSION").read_text().strip()
START_TIMEOUT_S = 300.0
"""Four models load and warm up before /readyz answers 200; minutes on a busy 2-core machine."""
SHIPPED = ("efficientnet_lite0", "shapes", "shapes-detector", "shapes-segmenter")

UNRELATED_APP = (
    'raise SystemExit("this folder\'s own app package was imported: camserve must not be")\n'
)
CLIENT_PROBE = """
import json, sys
from camserve_client import Client, __version__
with Client(sys.argv[1]) as client:
    listed = client.models()
    explained = client.explain(sys.argv[2], methods=["gradcam"], top_k=1)
    cam = client.cam(sys.argv[3], model="shapes")
heatmap = explained.explanation("gradcam").heatmap
print(json.dumps({
    "client_version": __version__,
    "models": sorted(model.name for model in listed.models),
    "default_model": listed.default_model,
    "explained_model": explained.model,
    "top_label": explained.predictions[0].label,
    "heatmap": [int(size) for size in heatmap.shape],
    "image": [explained.height, explained.width],
    "cam_label": cam.label,
    "cam_media_type": cam.media_type,
}))
"""


def log(message: str) -> None:
    print(f"wheel-check: {message}", flush=True)


def run(
    command: Sequence[str | Path], cwd: Path | None = None, env: dict[str, str] | None = None
) -> str:
    """The command's stdout; its stderr and a non-zero exit stop the check."""
    completed = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
    )
    if completed.returncode != 0:
        raise SystemExit(
            f"failed ({completed.returncode}): {' '.join(map(str, command))}\n"
            f"{completed.stdout[-4000:]}\n{completed.stderr[-4000:]}"
        )
    return completed.stdout


def build_wheels(dist: Path) -> tuple[Path, Path]:
    """camserve's wheel and the client's, built from this tree into ``dist``."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    run([*pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", dist, ROOT / "client", ROOT])
    (server,) = dist.glob(f"camserve-{VERSION}-*.whl")
    (client,) = dist.glob(f"camserve_client-{VERSION}-*.whl")
    return server, client


def check_wheel_contents(server: Path, client: Path) -> None:
    for wheel in (server, client):
        with zipfile.ZipFile(wheel) as archive:
            tops = {name.split("/")[0] for name in archive.namelist()}
        packages = sorted(top for top in tops if not top.endswith((".dist-info", ".data")))
        if "app" in tops:
            raise SystemExit(f"{wheel.name} installs a top-level app package")
        log(f"{wheel.name}: {wheel.stat().st_size / 1e3:,.0f} kB, installs {packages}")
    with zipfile.ZipFile(server) as archive:
        shipped = {
            name.removeprefix("camserve/shipped_models/")
            for name in archive.namelist()
            if name.startswith("camserve/shipped_models/")
        }
    expected = {f"{name}.toml" for name in SHIPPED} | {f"{name}.pt" for name in SHIPPED[1:]}
    if shipped != expected:
        raise SystemExit(f"the wheel's shipped models are {sorted(shipped)}, not {expected}")
    log(f"the camserve wheel carries the shipped models: {sorted(shipped)}")
    with zipfile.ZipFile(server) as archive:
        carried = lab_modules_in(archive.namelist())
    if carried:
        raise SystemExit(f"the camserve wheel carries the lab's modules: {carried}")
    log("the camserve wheel carries no module of the lab")


def lab_modules_in(names: Iterable[str]) -> list[str]:
    """The entries among a wheel's ``names`` that are the lab's: its package ``camserve_lab``,
    or one of its modules where it sat in camserve before it moved out (a module of the lab's
    top in ``camserve/quality/``, one of its ``cli/`` in ``camserve/cli/``)."""
    modules = [path.relative_to(LAB) for path in LAB.rglob("*.py") if path.stem != "__init__"]
    moved_from = {
        f"camserve/{'' if module.parts[0] == 'cli' else 'quality/'}{module.as_posix()}"
        for module in modules
    }
    return sorted(name for name in names if name.startswith("camserve_lab/") or name in moved_from)


def fresh_environment(path: Path, *requirements: str | Path, constraints: bool) -> Path:
    """A new virtual environment at ``path`` with ``requirements`` installed; its python."""
    run([sys.executable, "-m", "venv", path])
    python = path / "bin" / "python"
    pins: list[str | Path] = ["-c", ROOT / "constraints.txt"] if constraints else []
    pip: list[str | Path] = [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
    ]
    run([*pip, *pins, "--find-links", Path(requirements[0]).parent, *requirements])
    return python


def installed_megabytes(environment: Path) -> float:
    (site,) = environment.glob("lib/python*/site-packages")
    total = sum(path.stat().st_size for path in site.rglob("*") if path.is_file())
    return total / 1e6


def environment_without_camserve(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment less CAMSERVE_* and PYTHONPATH (nothing of the clone)."""
    kept = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CAMSERVE_") and key not in {"PYTHONPATH", "VIRTUAL_ENV"}
    }
    return {**kept, **extra}


def check_commands(server_python: Path, client_python: Path, folder: Path) -> None:
    """Run in ``folder``, outside the clone: ``python -c`` puts its working directory first
    on the path."""
    camserve = server_python.parent / "camserve"
    said = run([camserve, "--version"], cwd=folder).strip()
    metadata = "import importlib.metadata as m; print(m.version('camserve'))"
    server_version = run([server_python, "-c", metadata], cwd=folder).strip()
    client_metadata = "import camserve_client as c; print(c.__version__)"
    client_version = run([client_python, "-c", client_metadata], cwd=folder).strip()
    if (said, server_version, client_version) != (f"camserve {VERSION}", VERSION, VERSION):
        raise SystemExit(f"versions disagree: {said!r}, {server_version}, {client_version}")
    torch_probe = "import importlib.util as u; print(u.find_spec('torch'))"
    if run([client_python, "-c", torch_probe], cwd=folder) != "None\n":
        raise SystemExit("torch is importable in the client's environment")
    log(f"camserve --version says {said!r}; both packages' metadata say {VERSION}")
    helped = run([camserve, "--help"], cwd=folder)
    if LAB_INSTALL not in " ".join(helped.split()):
        raise SystemExit(f"camserve --help does not say what eval needs:\n{helped}")
    wide = environment_without_camserve({"COLUMNS": "200"})
    listed = run([camserve, "models"], cwd=folder, env=wide)
    if not listed.startswith("manifests from the models shipped with camserve"):
        raise SystemExit(f"camserve models does not say where the manifests are:\n{listed}")
    log("camserve --help lists every command; camserve models says:\n" + listed.rstrip())
    log("the client's environment has no torch")


def empty_folder_with_an_unrelated_app(folder: Path) -> Path:
    (folder / "app").mkdir(parents=True)
    (folder / "app" / "__init__.py").write_text(UNRELATED_APP)
    return folder


def serve_from(server_python: Path, folder: Path) -> ServerProcess:
    camserve = str(server_python.parent / "camserve")
    env = environment_without_camserve(
        {"TORCH_HOME": str(folder.parent / "torch"), "CAMSERVE_ALLOW_DOWNLOADS": "false"}
    )
    command = [camserve, "serve", "--host", LOOPBACK, "--port"]
    return start_server("camserve", lambda port: [*command, str(port)], env, folder)


def check_served(server: ServerProcess, client_python: Path, folder: Path) -> dict[str, object]:
    v2 = httpx.get(server.url("/v2"), timeout=10).raise_for_status().json()
    if v2.get("version") != VERSION:
        raise SystemExit(f"/v2 says version {v2.get('version')!r}, not {VERSION}")
    log(f"/v2 says {v2['name']} {v2['version']}")
    photo = SAMPLES_DIR / "photos" / "chelsea.jpg"
    star = SAMPLES_DIR / "shapes" / "star.jpg"
    env = environment_without_camserve({})
    answer = json.loads(
        run([client_python, "-c", CLIENT_PROBE, server.base_url, photo, star], cwd=folder, env=env)
    )
    if answer["models"] != sorted(SHIPPED):
        raise SystemExit(f"served {answer['models']}, not the shipped {sorted(SHIPPED)}")
    if answer["heatmap"] != answer["image"] or answer["cam_label"] != "star":
        raise SystemExit(f"unexpected answers: {answer}")
    log(f"the client from the torch-free environment: {answer}")
    return dict(answer)


def check_label_studio_backend(server: ServerProcess) -> None:
    """A Label Studio project's Choices control gets the cat photo's class."""
    photo = (SAMPLES_DIR / "photos" / "chelsea.jpg").read_bytes()
    task = {
        "id": 1,
        "data": {"image": "data:image/jpeg;base64," + base64.b64encode(photo).decode()},
    }
    config = (
        '<View><Image name="image" value="$image"/><Choices name="kind" toName="image">'
        '<Choice value="cat" predicted_values="Egyptian cat,tabby,tiger cat"/></Choices></View>'
    )
    response = httpx.post(
        server.url("/labelstudio/predict"),
        json={"tasks": [task], "label_config": config},
        timeout=120,
    )
    results = response.json().get("results") if response.status_code == 200 else None
    choices = [r["value"]["choices"] for r in results[0]["result"]] if results else None
    if choices != [["cat"]]:
        raise SystemExit(f"/labelstudio/predict answered {response.status_code}: {response.text}")
    log(f"/labelstudio/predict labels the cat photo: {response.json()['model_version']}")


def startup_report(log_text: str) -> list[str]:
    """The start-up report's lines: "camserve is ready ..." and the indented lines after it."""
    lines = log_text[log_text.index("camserve is ready") :].splitlines()
    return [lines[0], *itertools.takewhile(lambda line: line.startswith("  "), lines[1:])]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    arguments = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="camserve-wheel-check-"))
    try:
        server_wheel, client_wheel = build_wheels(work / "dist")
        check_wheel_contents(server_wheel, client_wheel)
        log("installing the camserve wheel with constraints.txt into a fresh environment...")
        server_python = fresh_environment(work / "server-venv", server_wheel, constraints=True)
        client_python = fresh_environment(work / "client-venv", client_wheel, constraints=False)
        empty = empty_folder_with_an_unrelated_app(work / "empty")
        check_commands(server_python, client_python, empty)
        server = serve_from(server_python, empty)
        with running(server, start_timeout_s=START_TIMEOUT_S):
            check_served(server, client_python, empty)
            check_label_studio_backend(server)
        said = server.log(tail=None)
        if "models from: the models shipped with camserve" not in said:
            raise SystemExit(f"the start-up report does not say where the models are:\n{said}")
        log("camserve serve said:\n" + "\n".join(startup_report(said)))
        for name in ("server-venv", "client-venv"):
            log(f"installed size of {name}: {installed_megabytes(work / name):.0f} MB")
    finally:
        if arguments.keep:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    log("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
