"""Each error's status is defined once, on its class (``http_status``): docs/api.md's table of
errors and the OpenAPI schema's error statuses say what the classes say."""

from __future__ import annotations

import re
from pathlib import Path

import camserve.engine.methods  # this and the next three each extend the error tree
import camserve.labeling.label_config
import camserve.labeling.task_image_errors
import camserve.serving.errors
from camserve.api.route_docs import ERRORS
from camserve.engine.errors import CamserveError

API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
FAULT = 500
LABELING_ONLY = {502}
"""Statuses only the labeling backends answer (an image's source failed): docs/labelstudio.md."""


def error_classes() -> list[type[CamserveError]]:
    found: list[type[CamserveError]] = []
    waiting = [CamserveError]
    while waiting:
        error_type = waiting.pop()
        found.append(error_type)
        waiting.extend(error_type.__subclasses__())
    return found


def error_table() -> dict[int, str]:
    """docs/api.md's ``## Errors`` table: each status and its row's text."""
    section = API_DOC.read_text().split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d{3}) \| (.*) \|$", section, flags=re.M)
    return {int(status): text for status, text in rows}


def test_the_table_lists_every_status_an_error_class_has() -> None:
    statuses = {error_type.http_status for error_type in error_classes()}
    assert set(error_table()) == statuses - LABELING_ONLY


def test_each_code_the_table_names_is_of_an_error_with_that_rows_status() -> None:
    status_of_code = {error_type.code: error_type.http_status for error_type in error_classes()}
    named = {
        code: status
        for status, text in error_table().items()
        for code in re.findall(r"`(\w+)`", text)
        if code in status_of_code
    }
    assert named == {code: status_of_code[code] for code in named}
    assert named["no_image_field"] == 400
    assert named["over_deadline"] == 422
    assert named["too_many_jobs"] == 429


def test_the_openapi_error_statuses_are_those_of_the_classes() -> None:
    statuses = {error_type.http_status for error_type in error_classes()}
    assert set(ERRORS) <= statuses - {FAULT}


def test_a_subclass_answers_with_its_bases_status_unless_it_sets_its_own() -> None:
    base = camserve.serving.errors.QueueFullError
    assert camserve.serving.errors.TooManyJobsError.http_status == base.http_status == 429
    timeout = camserve.labeling.task_image_errors.ImageFetchTimeoutError
    assert timeout.http_status == 504
    assert camserve.labeling.task_image_errors.ImageFetchFailedError.http_status == 502
    assert CamserveError.http_status == FAULT
