"""Reports kept on disk, one folder per model version and reference set, so that a restart
finds them: ``<audit_dir>/<model>/<version>-<key>/`` holds ``report.json`` (what the route
answers under ``report``) and ``maps.npz`` (the trained maps of the reference images, which
drift compares with the next version's). Each file is written whole (a temporary file renamed
over it), so that a reader never sees half of one."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from camserve.quality.audit.drift import VersionMaps

__all__ = ["ReportStore", "default_report_dir"]

logger = logging.getLogger(__name__)

REPORT_FILE = "report.json"
MAPS_FILE = "maps.npz"
_MAP_PREFIX = "map:"


def default_report_dir() -> Path:
    """Where reports are kept without ``CAMSERVE_AUDIT_DIR``: ``$XDG_CACHE_HOME/camserve/reports``
    (``~/.cache`` without it)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "camserve" / "reports"


class ReportStore:
    """The reports under ``root`` (created on first write)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, model: str, version: str, key: str) -> Path:
        return self.root / model / f"{version}-{key}"

    def load_report(self, model: str, version: str, key: str) -> dict[str, Any] | None:
        """The kept report, or ``None`` when there is none (or it cannot be read)."""
        path = self.folder(model, version, key) / REPORT_FILE
        try:
            report: dict[str, Any] = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            logger.warning("kept report %s cannot be read (%s); computing it again", path, error)
            return None
        return report

    def save_report(self, model: str, version: str, key: str, report: dict[str, Any]) -> Path:
        path = self.folder(model, version, key) / REPORT_FILE
        _write_whole(path, (json.dumps(report, indent=1) + "\n").encode())
        return path

    def load_maps(self, model: str, version: str, key: str) -> VersionMaps | None:
        path = self.folder(model, version, key) / MAPS_FILE
        try:
            with np.load(path, allow_pickle=False) as stored:
                return VersionMaps(
                    version,
                    [str(name) for name in stored["images"]],
                    [int(target) for target in stored["targets"]],
                    {
                        _pair(name): stored[name].astype(np.float32)
                        for name in stored.files
                        if name.startswith(_MAP_PREFIX)
                    },
                )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            logger.warning("kept maps %s cannot be read (%s)", path, error)
            return None

    def save_maps(self, model: str, key: str, maps: VersionMaps) -> Path:
        """Kept as float16: drift reads ranks and peaks, not the fourth digit."""
        path = self.folder(model, maps.version, key) / MAPS_FILE
        arrays: dict[str, Any] = {
            f"{_MAP_PREFIX}{method}@{layer}": heat.astype(np.float16)
            for (method, layer), heat in maps.maps.items()
        }
        arrays["images"] = np.asarray(maps.images, dtype=str)
        arrays["targets"] = np.asarray(maps.targets, dtype=np.int64)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".part", delete=False) as part:
            np.savez(part, **arrays)
        _publish(part.name, path)
        return path


def _pair(name: str) -> tuple[str, str]:
    method, _, layer = name.removeprefix(_MAP_PREFIX).partition("@")
    return method, layer


def _write_whole(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".part", delete=False) as part:
        part.write(data)
    _publish(part.name, path)


def _publish(written: str, path: Path) -> None:
    """The finished file at ``path``, readable by all (a temporary file is private)."""
    os.chmod(written, 0o644)
    os.replace(written, path)
