"""The summary of a GPU run: one markdown table of every result, under the device's name, with
the issue's goals and whether each was met, then each part's status and time."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Row = tuple[str, str, str, str, str]
"""(part, measurement, result, goal, verdict)."""


@dataclass(frozen=True)
class Outcome:
    part: str
    status: str
    """``ok``, ``failed (exit N)``, ``timed out after N s`` or ``not run: why``."""
    seconds: float
    data: dict[str, Any] | None
    """What the part wrote (its JSON), or None."""


def ratio(value: float) -> str:
    return f"{value:.2f}×"


def number(value: float) -> str:
    return f"{value:.3g}"


def verdict(met: bool) -> str:
    return "met" if met else "**NOT met**"


def environment_rows(data: dict[str, Any]) -> Iterator[Row]:
    device = data["device"]
    where = (
        device["name"]
        if not device.get("cuda")
        else (
            f"{device['name']}, {device['memory_gib']} GiB, CUDA {device['cuda']}, "
            f"cuDNN {device['cudnn']}"
        )
    )
    packages = data["packages"]
    yield ("environment", "device", where, "", "")
    yield (
        "environment",
        "software",
        f"Python {data['python']}, torch {packages['torch']}, torchvision "
        f"{packages['torchvision']}, numpy {packages['numpy']}, {data['cpus']} CPUs",
        "",
        "",
    )
    for module, error in data["import_errors"].items():
        yield ("environment", f"import {module}", error, "imports", verdict(False))


def test_rows(data: dict[str, Any]) -> Iterator[Row]:
    counts = data["counts"]
    if counts is None:
        yield ("GPU tests", "pytest", "no report: stopped before the end", "all pass", "")
    else:
        passed, failed, skipped = counts["passed"], counts["failed"], counts["skipped"]
        result = f"{passed} passed, {failed} failed, {skipped} skipped"
        yield ("GPU tests", "pytest", result, "all pass", verdict(failed == 0))
    yield from map_rows([r for r in data["records"] if r["check"] == "maps"])
    rendering = [r for r in data["records"] if r["check"] == "rendering"]
    if rendering:
        levels = max(max(r["heatmap_levels_off"], r["overlay_levels_off"]) for r in rendering)
        yield (
            "GPU tests",
            "rendering on the device vs the CPU, same maps",
            f"{levels} grey level(s) off at most",
            "≤ 1",
            verdict(levels <= 1),
        )
    for memory in [r for r in data["records"] if r["check"] == "gpu_memory"]:
        yield memory_row(memory)


MAP_GOALS = {"float32": 1e-4}
"""The issue's bound for float32 maps; the other precisions' are to be measured."""


def map_rows(records: list[dict[str, Any]]) -> Iterator[Row]:
    precisions = dict.fromkeys(r["precision"] for r in records)
    for precision in precisions:
        worst: dict[str, tuple[float, str]] = {}
        for record in (r for r in records if r["precision"] == precision):
            method, value = max(record["max_difference"].items(), key=lambda item: item[1])
            worst[record["model"]] = (value, method)
        result = ", ".join(f"{model} {number(v)} ({m})" for model, (v, m) in worst.items())
        goal = MAP_GOALS.get(precision)
        largest = max(value for value, _ in worst.values())
        yield (
            "GPU tests",
            f"maps vs the CPU, {precision}: largest difference per model (its method)",
            result,
            f"≤ {goal:.0e}" if goal is not None else "measure",
            verdict(largest <= goal) if goal is not None else "",
        )


def memory_row(record: dict[str, Any]) -> Row:
    readings = [reading for reading in record["readings"] if reading is not None]
    if not readings:
        result = f"{record['requests']} requests answered; no GPU gauge on {record['device']}"
        return ("GPU tests", "GPU memory gauge under load", result, "flat", "")
    growth = max(readings[1:], default=readings[0]) - readings[0]
    result = (
        f"{readings[0] / 2**20:.1f} MiB after the first cycle, then at most "
        f"{growth / 2**20:+.2f} MiB over {record['requests']} requests"
    )
    return (
        "GPU tests",
        "GPU memory gauge under load",
        result,
        "flat (≤ +1 MiB)",
        verdict(growth <= 2**20),
    )


def overhead_rows(part: str) -> Callable[[dict[str, Any]], Iterator[Row]]:
    def rows(data: dict[str, Any]) -> Iterator[Row]:
        for row in data["rows"]:
            seconds = row["seconds_per_image"]
            forward, grad_cam = seconds["forward"], seconds["camserve"]
            at = f"{row['model']}, batch {row['batch']}"
            yield (
                part,
                f"{at}: Grad-CAM / forward",
                f"{ratio(grad_cam / forward)} ({number(grad_cam)} vs {number(forward)} s/img)",
                "≤ 1.10×",
                verdict(grad_cam / forward <= 1.10),
            )
            if "pytorch_grad_cam" in seconds:
                peer = seconds["pytorch_grad_cam"]
                yield (part, f"{at}: pytorch-grad-cam / forward", ratio(peer / forward), "", "")
            top5 = seconds["camserve_top5"]
            yield (part, f"{at}: top-5 Grad-CAM / forward", ratio(top5 / forward), "", "")

    return rows


def seven_rows(data: dict[str, Any]) -> Iterator[Row]:
    for row in data["rows"]:
        seconds = row["seconds_per_image"]
        at = f"{row['model']}, batch {row['batch']}"
        share = seconds["seven"] / seconds["gradcam"]
        result = (
            f"{ratio(share)} ({number(seconds['seven'])} vs {number(seconds['gradcam'])} s/img)"
        )
        yield (
            "seven methods",
            f"{at}: 7 methods in one call / Grad-CAM",
            result,
            "≤ 1.3×",
            verdict(share <= 1.3),
        )
        if "peer_six" in seconds:
            peer = ratio(seconds["peer_six"] / seconds["gradcam"])
            yield ("seven methods", f"{at}: pytorch-grad-cam's 6 / Grad-CAM", peer, "", "")


def http_rows(data: dict[str, Any]) -> Iterator[Row]:
    pairs = [(p["engine_images_per_s"], p["http_requests_per_s"]) for p in data["rows"]]
    share = statistics.median(http / alone for alone, http in pairs)
    each = ", ".join(f"{http:.1f}/{alone:.1f}" for alone, http in pairs)
    yield (
        "HTTP",
        f"{data['model']}, concurrency {data['concurrency']}: HTTP req/s / engine-only img/s",
        f"{ratio(share)} (median of pairs {each})",
        "≥ 0.8×",
        verdict(share >= 0.8),
    )


def score_rows(data: dict[str, Any]) -> Iterator[Row]:
    for row in data["rows"]:
        seconds = row["seconds"]
        result = (
            f"camserve {number(seconds['exact'])} s, {row['reduced']} "
            f"{number(seconds['reduced'])} s (map Δ {row['reduced_max_difference']:.3f}), "
            f"pytorch-grad-cam {number(seconds['peer'])} s: "
            f"{ratio(seconds['peer'] / seconds['exact'])}"
        )
        what = f"{row['model']} {row['layer']} ({row['channels']} channels): s, peer / camserve"
        yield ("Score-CAM", what, result, "", "")


def detection_rows(data: dict[str, Any]) -> Iterator[Row]:
    for row in data["rows"]:
        seconds = row["seconds"]
        forward, camserve, naive = seconds["forward"], seconds["camserve"], seconds["naive"]
        what = f"{row['architecture']}: {row['detections']} detections' Grad-CAM / forward"
        result = (
            f"{ratio(camserve / forward)} (forward {number(forward)} s; naive "
            f"{ratio(naive / forward)})"
        )
        yield ("detections", what, result, "≤ 1.5×", verdict(camserve / forward <= 1.5))


def largest_rows(data: dict[str, Any]) -> Iterator[Row]:
    for row in data["rows"]:
        fitted = [a for a in row["attempts"] if a["fitted"] and a["batch"] == row["largest"]]
        detail = ""
        if fitted and fitted[0]["peak_bytes"] is not None:
            peak = fitted[0]["peak_bytes"]
            detail = f", peak {peak / 2**30:.1f} GiB ({peak / row['largest'] / 2**20:.1f} MiB/img)"
        failure = row["first_failure"]
        limit = (
            f"first failure {failure}"
            if failure is not None
            else f"none failed up to {data['max']}"
        )
        unfinished = "" if row["finished"] else "; stopped by its time budget"
        yield (
            "largest batch",
            f"{row['model']}, 224², Grad-CAM",
            f"{row['largest']} ({limit}{detail}{unfinished})",
            "",
            "",
        )


ROWS: dict[str, Callable[[dict[str, Any]], Iterator[Row]]] = {
    "environment": environment_rows,
    "GPU tests": test_rows,
    "engine overhead, fp32": overhead_rows("engine overhead, fp32"),
    "engine overhead, bf16": overhead_rows("engine overhead, bf16"),
    "seven methods": seven_rows,
    "HTTP": http_rows,
    "Score-CAM": score_rows,
    "detections": detection_rows,
    "largest batch": largest_rows,
}


def rows(outcome: Outcome) -> list[Row]:
    """The rows of one part: its results, or one row that says why there are none."""
    if outcome.data is not None:
        try:
            return list(ROWS[outcome.part](outcome.data))
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as error:
            return [(outcome.part, "—", f"unreadable results: {error!r}", "", "")]
    return [(outcome.part, "—", outcome.status, "", "")]


def markdown(title: str, outcomes: list[Outcome]) -> str:
    lines = [
        f"# {title}",
        "",
        "| part | measurement | result | goal | verdict |",
        "|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for outcome in outcomes for row in rows(outcome)]
    lines += ["", "| part | status | seconds |", "|---|---|---:|"]
    lines += [f"| {o.part} | {o.status} | {o.seconds:.0f} |" for o in outcomes]
    return "\n".join(lines) + "\n"
