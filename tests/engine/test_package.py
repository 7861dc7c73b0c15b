"""``app.engine``'s public names load on first use: the error tree and the manifests are read
without torch, and ``from app.engine import CamEngine`` still works."""

from __future__ import annotations

import subprocess
import sys

import pytest

import app.engine
from app.engine.engine import CamEngine
from app.engine.methods import METHODS


def test_the_public_names_are_the_engines_own() -> None:
    assert app.engine.CamEngine is CamEngine
    assert app.engine.METHODS is METHODS
    assert set(app.engine.__all__) == {
        "METHODS",
        "CamEngine",
        "CamMaps",
        "Explanation",
        "Preprocessing",
        "RenderedImage",
    }


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Engine'"):
        app.engine.Engine  # type: ignore[attr-defined]  # noqa: B018


def test_the_error_tree_and_manifests_import_no_torch() -> None:
    code = (
        "import sys\nimport app.engine.errors, app.engine.models.manifest\n"
        "print('torch' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert completed.stdout.strip() == "False"
