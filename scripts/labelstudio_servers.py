"""Label Studio and camserve as child processes on 127.0.0.1, for the end-to-end check.

Each server gets a free port, its own working folder, an environment with nothing inherited
that configures camserve, Label Studio or a Python environment, and a log file for its output.
``Service.stop`` sends SIGTERM, then SIGKILL if the process is still running 30 s later.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

__all__ = [
    "REPO_ROOT",
    "Admin",
    "BasicAuth",
    "E2EError",
    "Service",
    "start_camserve",
    "start_label_studio",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
STOP_TIMEOUT_S = 30.0
POLL_INTERVAL_S = 0.25
LOG_TAIL_CHARS = 6000

PREDICTION_VALIDATION_FLAG = "fflag_feat_utc_210_prediction_validation_15082025"


class E2EError(Exception):
    """Something the check needs did not work (a process, an API call); it cannot go on."""


@dataclass
class Service:
    """A server this script started: its process, address and log file."""

    name: str
    process: subprocess.Popen[bytes]
    base_url: str
    log_path: Path

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text[-chars:]

    def wait_until_up(self, path: str, timeout_s: float) -> float:
        """Poll ``path`` until it answers 200; the seconds that took. Fails if the process ends."""
        started = time.monotonic()
        with httpx.Client(timeout=5) as client:
            while time.monotonic() - started < timeout_s:
                if (code := self.process.poll()) is not None:
                    raise E2EError(
                        f"{self.name} exited with {code} while starting:\n{self.log_tail()}"
                    )
                try:
                    if client.get(self.base_url + path).status_code == 200:
                        return time.monotonic() - started
                except httpx.TransportError:
                    pass
                time.sleep(POLL_INTERVAL_S)
        raise E2EError(
            f"{self.name} did not answer {path} within {timeout_s:g} s:\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited after ``STOP_TIMEOUT_S``."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass(frozen=True)
class Admin:
    """Label Studio's first user, created at start-up; its legacy token is the script's."""

    email: str = "e2e@camserve.invalid"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    token: str = field(default_factory=lambda: secrets.token_hex(20))


@dataclass(frozen=True)
class BasicAuth:
    """The credentials camserve's ``/labelstudio`` routes require, and Label Studio sends."""

    user: str = "label-studio"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(16))


def start_label_studio(executable: Path, work_dir: Path, files_root: Path, admin: Admin) -> Service:
    """Label Studio with its database in ``work_dir``, serving local files from ``files_root``,
    and allowed to reach an ML backend on a loopback (or private) address."""
    port = _free_port()
    env = _child_environment(
        {
            "LABEL_STUDIO_BASE_DATA_DIR": str(work_dir / "data"),
            "LABEL_STUDIO_USERNAME": admin.email,
            "LABEL_STUDIO_PASSWORD": admin.password,
            "LABEL_STUDIO_USER_TOKEN": admin.token,
            "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
            "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(files_root),
            # Without these, Label Studio refuses an ML backend on a loopback or private address
            # (ML_BLOCK_LOCAL_IP), and answers 403 to the connection when it creates the
            # backend's webhook (SSRF_PROTECTION_ENABLED).
            "ML_BLOCK_LOCAL_IP": "false",
            "SSRF_PROTECTION_ENABLED": "false",
            # Validate each prediction against the labeling config before storing it (off by
            # default in 1.23): an invalid result then fails the run instead of slipping in.
            PREDICTION_VALIDATION_FLAG: "true",
            # Nothing leaves the machine: no error reports, usage data or version checks.
            "SENTRY_DSN": "",
            "FRONTEND_SENTRY_DSN": "",
            "COLLECT_ANALYTICS": "false",
            "LATEST_VERSION_CHECK": "false",
        }
    )
    command = [str(executable), "start", "--no-browser", "--enable-legacy-api-token"]
    command += ["--internal-host", "127.0.0.1", "--port", str(port)]
    command += ["--data-dir", str(work_dir / "data")]
    return _launch("label-studio", command, env, work_dir, port)


def start_camserve(
    work_dir: Path, label_studio_url: str, api_key: str, files_root: Path, auth: BasicAuth
) -> Service:
    """``python -m app serve`` with the shapes model, fetching task images from Label Studio."""
    port = _free_port()
    env = _child_environment(
        {
            "CAMSERVE_MODELS_DIR": str(REPO_ROOT / "models"),
            "CAMSERVE_MODELS": "shapes",
            "CAMSERVE_LABELSTUDIO_BASIC_AUTH_USER": auth.user,
            "CAMSERVE_LABELSTUDIO_BASIC_AUTH_PASS": auth.password,
            "LABEL_STUDIO_URL": label_studio_url,
            "LABEL_STUDIO_API_KEY": api_key,
            "LOCAL_FILES_DOCUMENT_ROOT": str(files_root),
            "OMP_NUM_THREADS": "1",
        }
    )
    command = [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port)]
    return _launch("camserve", command, env, work_dir, port)


def _free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _child_environment(settings: Mapping[str, str]) -> dict[str, str]:
    dropped = ("CAMSERVE_", "LABEL_STUDIO_", "PYTHON", "VIRTUAL_ENV")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    env.update(settings)
    return env


def _launch(
    name: str, command: list[str], env: dict[str, str], work_dir: Path, port: int
) -> Service:
    """Start ``command`` in ``work_dir`` (so no stray ``.env`` is read), its output going to
    ``<work_dir>/<name>.log``."""
    work_dir.mkdir(parents=True, exist_ok=True)
    log_path = work_dir / f"{name}.log"
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            env=env,
            cwd=work_dir,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    return Service(name, process, f"http://127.0.0.1:{port}", log_path)
