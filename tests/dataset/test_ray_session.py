"""How much of Ray's own output a dataset job lets through: everything where verbose; else
errors only from its Python loggers, no Ray Data progress bars, and the C++ logger's note that
it read its level taken out of stderr (the rest of what was written there passed on)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
import ray.data

from camserve.dataset.ray_session import (
    LEVEL_SET_LINE,
    QUIET_RAY_ENVIRONMENT,
    RAY_DATA_CONSOLE_HANDLER,
    RAY_DATA_LOGGER,
    RayOutput,
    quiet_ray_data,
    stderr_without,
)

RAY_LEVEL_NOTE = (
    "[2026-11-26 21:23:13,509 I 15367 15367] logging.cc:303: Set ray log level from "
    "environment variable RAY_BACKEND_LOG_LEVEL to 3\n"
)


def test_quiet_and_verbose_settings() -> None:
    quiet, verbose = RayOutput(), RayOutput(verbose=True)
    assert quiet.logging_level == logging.ERROR
    assert verbose.logging_level == logging.INFO
    assert quiet.environment == QUIET_RAY_ENVIRONMENT == {"RAY_BACKEND_LOG_LEVEL": "fatal"}
    assert verbose.environment == {}


@pytest.fixture
def ray_data_console() -> Iterator[logging.Handler]:
    (handler,) = [
        handler
        for handler in logging.getLogger(RAY_DATA_LOGGER).handlers
        if handler.name == RAY_DATA_CONSOLE_HANDLER
    ]
    level = handler.level
    context = ray.data.DataContext.get_current()
    bars = context.enable_progress_bars
    yield handler
    handler.setLevel(level)
    context.enable_progress_bars = bars


def test_ray_data_shows_errors_only_unless_verbose(ray_data_console: logging.Handler) -> None:
    context = ray.data.DataContext.get_current()
    quiet_ray_data(RayOutput())
    assert ray_data_console.level == logging.ERROR
    assert not context.enable_progress_bars
    quiet_ray_data(RayOutput(verbose=True))
    assert ray_data_console.level == logging.INFO
    assert context.enable_progress_bars


def test_the_level_note_is_taken_out_and_the_rest_passed_on(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with stderr_without(RayOutput(), LEVEL_SET_LINE):
        os.write(2, b"before\n")
        os.write(2, RAY_LEVEL_NOTE.encode())
        os.write(2, b"after\n")
    assert capfd.readouterr().err == "before\nafter\n"


def failing_start() -> None:
    with stderr_without(RayOutput(), LEVEL_SET_LINE):
        os.write(2, b"why it failed\n")
        raise RuntimeError("the start failed")


def test_what_was_held_comes_out_when_the_block_fails(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(RuntimeError, match="the start failed"):
        failing_start()
    assert capfd.readouterr().err == "why it failed\n"


def test_verbose_holds_nothing_back(capfd: pytest.CaptureFixture[str]) -> None:
    with stderr_without(RayOutput(verbose=True), LEVEL_SET_LINE):
        os.write(2, RAY_LEVEL_NOTE.encode())
    assert capfd.readouterr().err == RAY_LEVEL_NOTE
