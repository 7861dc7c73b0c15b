"""``configure_logging``: one JSON object a line on stderr, carrying the request id."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from camserve.serving.logs import REQUEST_ID, configure_logging


@pytest.fixture
def restored_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def emitted(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


@pytest.mark.usefixtures("restored_root_logger")
def test_each_record_is_a_json_line_with_the_request_id(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info")
    logger = logging.getLogger("camserve.test")
    logger.info("outside a request")
    token = REQUEST_ID.set("abc123")
    try:
        logger.warning("inside %s", "a request")
    finally:
        REQUEST_ID.reset(token)
    first, second = emitted(capsys)
    assert first["request_id"] == "-"
    assert second["request_id"] == "abc123"
    assert second["message"] == "inside a request"
    assert second["level"] == "WARNING"
    assert second["logger"] == "camserve.test"
    assert "time" in second


@pytest.mark.usefixtures("restored_root_logger")
def test_configuring_again_replaces_the_handler_and_sets_the_level(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info")
    configure_logging("warning")
    camserve_handlers = [h for h in logging.getLogger().handlers if h.get_name() == "camserve"]
    assert len(camserve_handlers) == 1
    logger = logging.getLogger("camserve.test")
    logger.info("dropped")
    logger.error("kept")
    assert [record["message"] for record in emitted(capsys)] == ["kept"]
