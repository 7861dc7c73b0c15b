"""Fixtures of the integration tests: real servers started with ``python -m camserve serve``.

Starting a server costs a few seconds, so each module shares one server (module scope) across
the tests its settings allow. A failing test's report carries the log of every server running
at the time.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from tests.integration.live import RUNNING
from tests.support import write_test_models


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for server in RUNNING:
            report.sections.append((f"camserve server log ({server.base_url})", server.log()))
    return report


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``tiny`` and ``mini`` test models (random weights, 64×64 input)."""
    return write_test_models(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where a module's servers run and write their logs."""
    return tmp_path_factory.mktemp("server")
