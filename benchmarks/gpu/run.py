"""camserve's GPU checks and benchmarks in one bounded run (``benchmarks/gpu/parts.py`` lists
them), for a lent GPU machine, or on the CPU as a dry run.

Each part runs as its own process, under the smaller of its own time limit and what is left of
the run's budget; a part that fails or runs out of time is reported and the next one starts.
After every part ``OUT/summary.md`` (one table of every result under the device's name, the
goals and whether each was met) and ``OUT/results.json`` (every part's status and numbers)
are written again, so a run cut short still leaves them; ``OUT/junit.xml`` holds the GPU tests'
results. The parts' output goes to this program's own (``run.sh`` keeps it in ``OUT/log.txt``).

Usage::

    python -m benchmarks.gpu.run --out OUT                          # on a GPU: full size
    python -m benchmarks.gpu.run --out OUT --device cpu --size tiny  # the dry run
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from benchmarks.gpu.parts import JUNIT, RECORDS, Part, parts
from benchmarks.gpu.summary import Outcome, markdown

ROOT = Path(__file__).resolve().parents[2]
LEAST_USEFUL_S = 10.0
"""A part is not started with less time than this left."""


def run_part(part: Part, deadline: float, work: Path) -> Outcome:
    """Run ``part`` to its end or its time limit, whichever comes first."""
    if part.not_run is not None:
        return Outcome(part.name, f"not run: {part.not_run}", 0.0, None)
    limit = min(part.limit_s, deadline - time.monotonic())
    if limit < LEAST_USEFUL_S:
        return Outcome(part.name, "not run: the run's time budget was spent", 0.0, None)
    print(
        f"\n===== {part.name} (at most {limit:.0f} s): python {' '.join(part.command)}", flush=True
    )
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, *part.command],
        cwd=ROOT,
        env=os.environ | part.environment,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: a server it started ends with it
    )
    status = f"timed out after {limit:.0f} s"
    try:
        code = process.wait(timeout=limit)
        status = "ok" if code == 0 else f"failed (exit {code})"
    except subprocess.TimeoutExpired:
        pass
    finally:  # also when this program is stopped: nothing the part started outlives it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    seconds = time.monotonic() - started
    print(f"===== {part.name}: {status} in {seconds:.0f} s", flush=True)
    return Outcome(part.name, status, seconds, results_of(part, work))


def results_of(part: Part, work: Path) -> dict[str, Any] | None:
    """What ``part`` wrote: its JSON file, or for the GPU tests their counts and records."""
    if part.name == "GPU tests":
        return test_results(work)
    path = work / part.output if part.output else None
    if path is None or not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def test_results(work: Path) -> dict[str, Any] | None:
    """The tests' counts from pytest's JUnit XML report (None when pytest was stopped before
    writing it), and what they recorded; None when neither exists."""
    junit, records = work / JUNIT, work / RECORDS
    if not junit.exists() and not records.exists():
        return None
    counts = None
    if junit.exists():
        suite = ElementTree.parse(junit).getroot()
        suite = suite if suite.tag == "testsuite" else suite[0]
        total, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        counts = {"passed": total - skipped - failed, "failed": failed, "skipped": skipped}
    lines = records.read_text().splitlines() if records.exists() else []
    return {"counts": counts, "records": [json.loads(line) for line in lines]}


def title(outcomes: list[Outcome], device: str) -> str:
    environment = next((o.data for o in outcomes if o.part == "environment" and o.data), None)
    if environment is None:
        return f"camserve on {device}"
    name = environment["device"]["name"]
    return f"camserve on {name} ({device}), torch {environment['packages']['torch']}"


def write_outputs(out: Path, work: Path, outcomes: list[Outcome], about: dict[str, Any]) -> None:
    (out / "summary.md").write_text(markdown(title(outcomes, about["device"]), outcomes))
    results = {**about, "parts": [asdict(outcome) for outcome in outcomes]}
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    if (work / JUNIT).exists():
        shutil.copyfile(work / JUNIT, out / JUNIT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where the results go")
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run")
    parser.add_argument("--size", default="full", choices=["full", "tiny"])
    parser.add_argument("--budget-s", type=float, default=440.0, help="seconds for every part")
    arguments = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout` stops it: clean up
    deadline = time.monotonic() + arguments.budget_s
    arguments.out.mkdir(parents=True, exist_ok=True)
    about = {"device": arguments.device, "size": arguments.size, "budget_s": arguments.budget_s}
    if arguments.device == "cpu":
        os.environ.setdefault("OMP_NUM_THREADS", "1")  # the dry run shares a small machine
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="camserve-gpu-run-") as folder:
        work = Path(folder)
        for part in parts(arguments.size, arguments.device, work):
            outcomes.append(run_part(part, deadline, work))
            write_outputs(arguments.out, work, outcomes, about)
    print("\n" + (arguments.out / "summary.md").read_text(), flush=True)


if __name__ == "__main__":
    main()
