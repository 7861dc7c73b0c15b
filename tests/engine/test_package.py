"""``camserve.engine``'s public names load on first use: the error tree and the manifests are read
without torch, and ``from camserve.engine import CamEngine`` still works."""

from __future__ import annotations

import subprocess
import sys

import pytest

import camserve.engine
from camserve.engine.engine import CamEngine
from camserve.engine.methods import METHODS


def test_the_public_names_are_the_engines_own() -> None:
    assert camserve.engine.CamEngine is CamEngine
    assert camserve.engine.METHODS is METHODS
    assert set(camserve.engine.__all__) == {
        "METHODS",
        "CamEngine",
        "CamMaps",
        "Explanation",
        "Preprocessing",
        "RenderedImage",
        "RunControl",
    }


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Engine'"):
        camserve.engine.Engine  # type: ignore[attr-defined]  # noqa: B018


def test_the_error_tree_and_manifests_import_no_torch() -> None:
    code = (
        "import sys\nimport camserve.engine.errors, camserve.engine.models.manifest\n"
        "print('torch' in sys.modules)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )

    assert completed.stdout.strip() == "False"
