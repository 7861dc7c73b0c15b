"""Fixtures of the HTTP tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import write_test_models


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Manifests of the two quick test models, ``mini`` (the default) and ``tiny``."""
    return write_test_models(tmp_path_factory.mktemp("models"))
