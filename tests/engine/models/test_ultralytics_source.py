"""Ultralytics is imported only when a YOLO model is loaded, and then offline: no telemetry,
no run-time installs, its settings file outside the user's home folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from camserve.engine.models.sources.ultralytics_source import CONFIG_FOLDER
from tests.engine.yolo_models import require_ultralytics

REPORT = (
    "import json, sys\n"
    "from camserve.engine.models.sources.ultralytics_source import import_ultralytics\n"
    "before = 'ultralytics' in sys.modules\n"
    "utils = import_ultralytics('ultralytics.utils')\n"
    "print(json.dumps({'before': before, 'online': utils.ONLINE, "
    "'autoinstall': utils.AUTOINSTALL, 'settings': str(utils.SETTINGS.file)}))\n"
)


def _report(home: Path, **variables: str) -> dict[str, object]:
    """What a fresh process that imports ultralytics through camserve sees, with ``home`` as
    its home folder, no ``YOLO_*`` variable of ours, and ``variables`` set."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("YOLO_") and key != "XDG_CONFIG_HOME"
    }
    environment.update(HOME=str(home), **variables)
    completed = subprocess.run(
        [sys.executable, "-c", REPORT],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    report: dict[str, object] = json.loads(completed.stdout.strip().splitlines()[-1])
    return report


def test_camserve_imports_ultralytics_offline_and_keeps_its_settings_out_of_home(
    tmp_path: Path,
) -> None:
    require_ultralytics()
    home = tmp_path / "home"
    home.mkdir()

    report = _report(home)

    settings = Path(tempfile.gettempdir()) / CONFIG_FOLDER / "Ultralytics" / "settings.json"
    assert report == {
        "before": False,
        "online": False,
        "autoinstall": False,
        "settings": str(settings),
    }
    assert list(home.iterdir()) == []


def test_ultralytics_settings_the_user_gave_are_kept(tmp_path: Path) -> None:
    require_ultralytics()
    home, config = tmp_path / "home", tmp_path / "yolo-config"
    home.mkdir()

    report = _report(home, YOLO_CONFIG_DIR=str(config), YOLO_AUTOINSTALL="true")

    assert report["autoinstall"] is True
    assert report["settings"] == str(config / "Ultralytics" / "settings.json")


def test_the_server_and_the_engine_import_no_ultralytics() -> None:
    """AGPL-3.0 code runs only where a manifest asks for a YOLO model (docs/yolo.md)."""
    code = (
        "import sys\nimport camserve.api.application, camserve.engine.detection_maps\n"
        "import camserve.engine.models.yolo_pass\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'ultralytics'))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert completed.stdout.strip().splitlines()[-1] == "[]"
