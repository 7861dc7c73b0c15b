"""The start-up report people read: the page URL, the served models, the fixes for the rest."""

from __future__ import annotations

import pytest

from camserve.api.startup_report import another_port_hint, page_url, startup_report


def test_a_wildcard_interface_is_shown_as_localhost() -> None:
    assert page_url("0.0.0.0", 8000) == "http://localhost:8000/"
    assert page_url("::", 9000) == "http://localhost:9000/"
    assert page_url("127.0.0.1", 8080) == "http://127.0.0.1:8080/"
    assert page_url("::1", 8080) == "http://[::1]:8080/"


def test_the_report_names_the_page_the_models_and_each_fix() -> None:
    fix = "pretrained weights are not in the cache: run 'camserve fetch-weights resnet50'"
    report = startup_report(
        "http://localhost:8000/", ["mini", "shapes"], "shapes", {"resnet50": fix}, 8000
    )
    assert report.splitlines() == [
        "camserve is ready: open http://localhost:8000/ (API docs: http://localhost:8000/docs)",
        "  serving: mini, shapes (default)",
        f"  not served: resnet50: {fix}",
        "  another port: CAMSERVE_PORT=9000 make serve (or camserve serve --port 9000)",
    ]


@pytest.mark.parametrize(("port", "other"), [(8000, 9000), (9000, 9001), (9001, 9000)])
def test_the_port_hint_names_a_port_other_than_the_one_served(port: int, other: int) -> None:
    assert another_port_hint(port) == (
        f"  another port: CAMSERVE_PORT={other} make serve (or camserve serve --port {other})"
    )


def test_a_chosen_port_gets_no_hint_about_choosing_one() -> None:
    report = startup_report("http://127.0.0.1:8011/", ["mini"], "mini", {}, 8011, port_chosen=True)
    assert report.splitlines() == [
        "camserve is ready: open http://127.0.0.1:8011/ (API docs: http://127.0.0.1:8011/docs)",
        "  serving: mini (default)",
    ]


def test_the_report_says_where_the_manifests_came_from() -> None:
    shipped = "the models shipped with camserve (/site/camserve/shipped_models; no ./models here)"
    report = startup_report(
        "http://127.0.0.1:8011/", ["mini"], "mini", {}, 8011, port_chosen=True, models_from=shipped
    )
    assert report.splitlines()[1:] == ["  serving: mini (default)", f"  models from: {shipped}"]
