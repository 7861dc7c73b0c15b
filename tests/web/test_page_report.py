"""The explanation report on the page (``reportbadges.js``, ``reportwatch.js``), in a real
browser on a real server whose reports are on: once the shipped ``shapes`` model's report is
ready, each method's checkbox says at the chosen layer whether its maps pass the sanity check,
fail it or are undecided (the seeds disagree), and how it ranks on faithfulness (ROAD, tied
where the report's intervals do not separate the methods), as the report's JSON says, and a
link opens the report; while the report is computed a quiet note says how far it has come, and
the page asks again every few seconds, then no more. The shipped detector's report badges its
methods at its pyramid the same way; a server whose reports are off (404 ``reports_off``) shows
nothing, and no error."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Route, expect

from tests.integration.live import LiveServer, live_server, poll_until
from tests.support import SHIPPED_MODELS
from tests.web.pages import PHONE, WebPage, open_page

pytestmark = pytest.mark.slow

MODEL, DETECTOR = "shapes", "shapes-detector"
REPORT_PATH = f"/v1/models/{MODEL}/report"
REPORT_LIMIT_S = 300.0
"""The shapes report takes about 20 s on two busy cores (three cascades), the detector's about
a minute after it; at a load average of 8 the detector's took over 120 s."""
PAGE_POLL_S = 4.0
"""How often the page asks again while the report is computed (reportwatch.js)."""
SAMPLE = Path(__file__).resolve().parents[2] / "app/camserve/web/static/samples/shapes/star.jpg"
BADGES = "#methods .report-badges"
NOTE = "#report-note"

Body = dict[str, Any]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The shipped ``shapes`` classifier and detector, reports on, kept in a fresh folder."""
    settings = {
        "models": f"{MODEL},{DETECTOR}",
        "audit": "true",
        "audit_dir": tmp_path_factory.mktemp("reports"),
    }
    with live_server(SHIPPED_MODELS, tmp_path_factory.mktemp("report-server"), settings) as running:
        yield running


def report_of(server: LiveServer, model: str = MODEL) -> Body:
    response = httpx.get(server.url(f"/v1/models/{model}/report"), timeout=10)
    assert response.status_code == 200, response.text
    body: Body = response.json()
    return body


@pytest.fixture(scope="module")
def ready_report(server: LiveServer) -> Body:
    """The ``shapes`` report once the server has computed it."""
    poll_until(
        lambda: report_of(server)["state"] == "ready",
        timeout=REPORT_LIMIT_S,
        what="the shapes report ready",
    )
    return report_of(server)


SANITY_WORDS = {"pass": "✓ sanity", "fail": "✗ sanity", "undecided": "? sanity"}
SPOKEN = {"pass": "check passed", "fail": "check failed", "undecided": "check undecided"}


def rank_words(rank: Body) -> tuple[str, str]:
    """The rank badge's words as shown and as spoken, from the report's rank."""
    best, worst, count = rank["best"], rank["worst"], rank["of"]
    if best == worst:
        return f"#{best}/{count} faithful", f"faithfulness rank {best} of {count}"
    return (
        f"tied #{best}-{worst}/{count} faithful",
        f"faithfulness rank {best} to {worst} of {count}, tied",
    )


def shown_badges(web: WebPage) -> dict[str, Body]:
    """Per method whose box carries badges: the sanity outcome, its words as shown and as
    spoken (with the visually hidden ones), its title, and the rank's words and title."""
    badges: dict[str, Body] = web.page.evaluate(
        """() => {
          const shown = (node) => {
            const copy = node.cloneNode(true);
            copy.querySelectorAll('.visually-hidden').forEach((hidden) => hidden.remove());
            return copy.textContent.trim();
          };
          return Object.fromEntries(Array.from(document.querySelectorAll('#methods label'))
            .filter((label) => label.querySelector('.report-badges'))
            .map((label) => {
              const sanity = label.querySelector('.badge.sanity');
              const rank = label.querySelector('.badge.rank');
              return [label.querySelector('input').value, {
                passed: sanity.dataset.passed === 'true',
                verdict: sanity.dataset.verdict,
                sanity: shown(sanity),
                spoken: sanity.textContent.trim(),
                sanityTitle: sanity.title,
                rank: shown(rank),
                rankSpoken: rank.querySelector('.visually-hidden').textContent,
                rankTitle: rank.title,
              }];
            }));
        }"""
    )
    return badges


def report_calls(web: WebPage, model: str = MODEL) -> int:
    return web.api_calls.count(f"GET /v1/models/{model}/report")


def test_each_method_shows_its_sanity_check_and_faithfulness_rank(
    web: WebPage, ready_report: Body
) -> None:
    report = ready_report["report"]
    layer = report["settings"]["layers"][0]
    rows = [row for row in report["rows"] if row["layer"] == layer]
    outcomes = {row["method"]: row["sanity"]["verdict"] for row in rows}
    # The page draws all three verdicts: at shapes' layer4 the seeds disagree on Grad-CAM++
    assert set(outcomes.values()) == {"pass", "fail", "undecided"}, outcomes
    tied = [
        row
        for row in rows
        if row["faithfulness"]["rank"]["best"] < row["faithfulness"]["rank"]["worst"]
    ]
    assert tied, rows  # five images do not separate identical maps (CAM and Grad-CAM here)
    web.page.select_option("#model", MODEL)
    expect(web.page.locator(BADGES)).to_have_count(len(rows))

    shown = shown_badges(web)
    assert set(shown) == set(outcomes)
    for row in rows:
        method, badge = row["method"], shown[row["method"]]
        verdict = row["sanity"]["verdict"]
        assert (badge["passed"], badge["verdict"]) == (row["sanity"]["passed"], verdict), method
        assert badge["sanity"] == SANITY_WORDS[verdict], badge
        assert badge["spoken"].endswith(SPOKEN[verdict]), badge
        low, high = (f"{value:.2f}" for value in row["sanity"]["decisive_range"])
        assert f"correlation of {low} to {high} with the trained" in badge["sanityTitle"], badge
        assert "(3 seeds)" in badge["sanityTitle"], badge
        words, spoken = rank_words(row["faithfulness"]["rank"])
        assert (badge["rank"], badge["rankSpoken"]) == (words, spoken), (method, badge)
        assert f"ROAD {row['faithfulness']['road']:.3f}" in badge["rankTitle"], badge
        assert f"over {row['faithfulness']['images']} images" in badge["rankTitle"], badge
    assert shown["eigencam"]["sanityTitle"].count("absolute Spearman") == 1
    best = max(rows, key=lambda row: row["faithfulness"]["road"])
    assert shown[best["method"]]["rank"].startswith(("#1/", "tied #1-"))

    note = web.page.locator(NOTE)
    expect(note).to_have_text(
        f"Sanity check and faithfulness rank at {layer}, from the explanation report "
        "(JSON, opens in a new tab)."
    )
    link = note.get_by_role("link")
    expect(link).to_have_attribute("href", REPORT_PATH)
    expect(link).to_have_attribute("target", "_blank")
    served = httpx.get(web.server.url(link.get_attribute("href") or ""), timeout=10).json()
    assert served["report"]["rows"] == report["rows"]

    web.explain_after("set_input_files", "#file-input", str(SAMPLE))
    expect(web.page.locator(BADGES)).to_have_count(len(rows))  # kept once an image is explained
    web.screenshot("desktop")
    web.page.set_viewport_size(PHONE)
    expect(web.page.locator(BADGES)).to_have_count(len(rows))
    widths = web.page.evaluate(
        "() => Array.from(document.querySelectorAll('#methods label'),"
        " (label) => label.getBoundingClientRect().right)"
    )
    assert max(widths) <= PHONE["width"], widths  # the badges wrap inside the column
    web.screenshot("phone")
    assert web.error_text() == ""


def test_a_layer_the_report_does_not_cover_shows_no_badges_but_says_which_it_covers(
    web: WebPage, ready_report: Body
) -> None:
    web.page.select_option("#model", MODEL)
    expect(web.page.locator(BADGES).first).to_be_visible()
    web.page.select_option("#layer", "layer3")
    expect(web.page.locator(BADGES)).to_have_count(0)
    layers = ", ".join(dict.fromkeys(row["layer"] for row in ready_report["report"]["rows"]))
    expect(web.page.locator(NOTE)).to_contain_text(f"covers the layers {layers}.")
    web.page.select_option("#layer", "")
    expect(web.page.locator(BADGES).first).to_be_visible()
    assert report_calls(web) == 1  # the report is asked for once per version, not per layer


def test_while_the_report_is_computed_a_note_says_how_far_and_the_page_asks_again(
    web: WebPage, ready_report: Body
) -> None:
    computing = {**ready_report, "state": "running", "progress": 0.4, "report": None}
    answered: list[str] = []
    released = threading.Event()

    def running_until_released(route: Route) -> None:
        """Answer "running" until the test has seen the note, however slowly the page came up;
        the real answer after that."""
        if released.is_set():
            answered.append("real")
            route.continue_()
        else:
            answered.append("running")
            route.fulfill(json=computing)

    web.page.route(f"**{REPORT_PATH}", running_until_released)
    web.page.clock.install(time=0)
    web.page.clock.pause_at(1)  # the page's timers fire when the test moves its clock, not before
    web.open()
    web.page.select_option("#model", MODEL)
    note = web.page.locator(NOTE)
    expect(note).to_have_text("Explanation report: computing (40 %).")
    expect(web.page.locator(BADGES)).to_have_count(0)
    web.screenshot("computing")
    released.set()
    web.page.clock.run_for(int(PAGE_POLL_S * 1000))  # a poll period: the page asks again
    expect(web.page.locator(BADGES).first).to_be_visible()
    assert answered[-1] == "real", answered
    assert answered.count("real") == 1, answered
    expect(note).to_contain_text("Sanity check and faithfulness rank")
    web.page.clock.run_for(int(10 * PAGE_POLL_S * 1000))
    assert answered.count("real") == 1, "the page kept asking once the report was ready"


def test_a_detector_s_badges_show_at_its_pyramid(web: WebPage) -> None:
    """The detector's report (computed after the classifier's) badges its methods as well."""
    poll_until(
        lambda: report_of(web.server, DETECTOR)["state"] == "ready",
        timeout=REPORT_LIMIT_S,
        what="the detector's report ready",
    )
    report = report_of(web.server, DETECTOR)["report"]
    rows = [row for row in report["rows"] if row["layer"] == "backbone"]
    web.page.select_option("#model", DETECTOR)
    expect(web.page.locator(BADGES)).to_have_count(len(rows))
    shown = shown_badges(web)
    assert {method: badge["passed"] for method, badge in shown.items()} == {
        row["method"]: row["sanity"]["passed"] for row in rows
    }
    assert shown["eigencam"]["sanity"] == "✗ sanity"  # class-blind: the heads change nothing
    expect(web.page.locator(NOTE)).to_contain_text("Sanity check and faithfulness rank at backbone")
    web.screenshot("detector")
    assert web.error_text() == ""


def test_a_server_without_reports_shows_nothing_and_no_error(
    browser: Browser, page_server: LiveServer
) -> None:
    """The shared page server (test models, reports off): one call answers 404 reports_off,
    then the page asks no more, for any model."""
    web, context = open_page(browser, page_server, "reports-off")
    try:
        first = web.page.eval_on_selector("#model", "(select) => select.value")
        poll_until(lambda: report_calls(web, first) == 1, what="the page asking for the report")
        answer = httpx.get(page_server.url(f"/v1/models/{first}/report"), timeout=10)
        assert (answer.status_code, answer.json()["error"]["code"]) == (404, "reports_off")
        other = next(
            value
            for value in web.page.eval_on_selector_all(
                "#model option", "(all) => all.map((o) => o.value)"
            )
            if value != first
        )
        web.page.select_option("#model", other)
        web.page.wait_for_timeout(500)
        expect(web.page.locator(NOTE)).to_be_hidden()
        expect(web.page.locator(BADGES)).to_have_count(0)
        assert report_calls(web, other) == 0
        assert web.error_text() == ""
    finally:
        context.close()
    assert web.page_errors == [], web.page_errors
    assert web.elsewhere == [], web.elsewhere
