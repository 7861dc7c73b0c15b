"""Label Studio and camserve as child processes on 127.0.0.1, for the end-to-end check.

Each server gets a free port, its own working folder, an environment with nothing inherited
that configures camserve, Label Studio or a Python environment, and a log file for its output
(``tests.harness.live_server`` starts, polls and stops them).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness import live_server
from tests.harness.live_server import LOOPBACK, ServerProcess, start_server

__all__ = [
    "REPO_ROOT",
    "Admin",
    "BasicAuth",
    "E2EError",
    "start_camserve",
    "start_label_studio",
]

REPO_ROOT = Path(__file__).resolve().parents[2]

PREDICTION_VALIDATION_FLAG = "fflag_feat_utc_210_prediction_validation_15082025"


class E2EError(Exception):
    """Something the check needs did not work (a process, an API call); it cannot go on."""


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


def start_label_studio(
    executable: Path, work_dir: Path, files_root: Path, admin: Admin
) -> ServerProcess:
    """Label Studio with its database in ``work_dir``, serving local files from ``files_root``,
    and allowed to reach an ML backend on a loopback (or private) address."""
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

    data = str(work_dir / "data")

    def command(port: int) -> list[str]:
        start = [str(executable), "start", "--no-browser", "--enable-legacy-api-token"]
        return [*start, "--internal-host", LOOPBACK, "--port", str(port), "--data-dir", data]

    return start_server("label-studio", command, env, work_dir)


def start_camserve(
    work_dir: Path,
    label_studio_url: str,
    api_key: str,
    files_root: Path,
    auth: BasicAuth,
    *,
    models_dir: Path = REPO_ROOT / "models",
    model: str = "shapes",
    settings: Mapping[str, str] | None = None,
) -> ServerProcess:
    """``python -m camserve serve`` with one model (the shapes model unless told otherwise) as the
    Label Studio backend's, fetching task images from Label Studio; ``settings`` adds to (or
    replaces) its environment."""
    env = _child_environment(
        {
            "CAMSERVE_MODELS_DIR": str(models_dir),
            "CAMSERVE_MODELS": model,
            "CAMSERVE_LABELSTUDIO_MODEL": model,
            "CAMSERVE_LABELSTUDIO_BASIC_AUTH_USER": auth.user,
            "CAMSERVE_LABELSTUDIO_BASIC_AUTH_PASS": auth.password,
            "LABEL_STUDIO_URL": label_studio_url,
            "LABEL_STUDIO_API_KEY": api_key,
            "LOCAL_FILES_DOCUMENT_ROOT": str(files_root),
            "OMP_NUM_THREADS": "1",
            **(settings or {}),
        }
    )
    return live_server.start_camserve(env, work_dir)


def _child_environment(settings: Mapping[str, str]) -> dict[str, str]:
    dropped = ("CAMSERVE_", "LABEL_STUDIO_", "PYTHON", "VIRTUAL_ENV")
    env = {key: value for key, value in os.environ.items() if not key.startswith(dropped)}
    env.update(settings)
    return env
