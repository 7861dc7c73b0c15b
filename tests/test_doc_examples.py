"""Every example of the README and of docs/*.md runs as written against the shipped models.

Each fenced ``bash`` and ``python`` block runs, from a scratch folder that holds the repository's
``app/`` and ``models/`` (so the samples' relative paths resolve and nothing is written into the
checkout), against one live camserve serving the shipped models; the README's address
(127.0.0.1:8000) becomes that server's. What a block writes there must be where the
repository's .gitignore keeps it out of ``git status`` (``out/``), as a reader runs it from the
root. A bash block runs under ``set -euo pipefail`` with ``curl`` given ``--fail``, so an HTTP
error fails it; ``camserve`` and ``python`` are the test's own environment's. A block that
cannot run here has ``<!-- example: not run (reason) -->`` right before it, and that comment
must give the reason. TOML examples must be valid manifests, and every relative link must reach
its file (and heading).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from camserve.engine.models.manifest import ModelSpec
from tests.harness.live_server import TERMINAL_VARIABLES
from tests.integration.live import LiveServer, live_server
from tests.support import SHIPPED_MODELS
from tests.threads import server_environment
from tests.tolerances import assert_within

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SERVED_MODELS = "efficientnet_lite0,shapes,shapes-detector,shapes-segmenter"
DEMO_FIRST = "shapes,efficientnet_lite0"
"""An operator's order that makes the demo model the default (issue #41): the examples that
call a model by its layers must name it."""
README_ADDRESSES = ("127.0.0.1:8000", "localhost:8000")
"""Where the examples expect ``make serve``; replaced by the live server's address."""
WORKSPACE_LINKS = ("app", "models")
"""What the examples read from the repository, linked into their scratch folder."""
BLOCK_TIMEOUT_S = 300

LANGUAGES = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python", "py": "python"}
"""Fence languages that are commands or code, and how each runs."""
FENCE = re.compile(r"^\s*```\s*(?P<language>[\w+-]*)")
MARKER = re.compile(r"^\s*<!--\s*example:\s*not run\s*\((?P<reason>.*)\)\s*-->\s*$")
MARKER_START = re.compile(r"^\s*<!--\s*example:")
CURL_WITH_FAIL = 'curl() { command curl --fail --show-error "$@"; }\n'


@dataclass(frozen=True)
class Block:
    """One fenced block of a document."""

    document: Path
    line: int
    """The line of its opening fence, from 1."""
    language: str
    text: str
    marker: str | None
    """The comment line right before it when that is an example marker, else None."""

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"

    @property
    def runner(self) -> str | None:
        return LANGUAGES.get(self.language)

    @property
    def skip_reason(self) -> str | None:
        match = MARKER.match(self.marker) if self.marker else None
        return match["reason"].strip() if match else None


def fenced_blocks(document: Path) -> Iterator[Block]:
    lines = document.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next(
            (i for i in range(index + 1, len(lines)) if lines[i].strip().startswith("```")),
            len(lines),
        )
        before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        yield Block(
            document,
            index + 1,
            opening["language"].lower(),
            "\n".join(lines[index + 1 : end]) + "\n",
            before if MARKER_START.match(before) else None,
        )
        index = end + 1


def outside_code(document: Path) -> str:
    """The document without its fenced blocks and inline code spans."""
    text = re.sub(r"^\s*```.*?^\s*```[^\n]*$", "", document.read_text(), flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


ALL_BLOCKS = [block for document in DOCUMENTS for block in fenced_blocks(document)]
RUNNABLE = [block for block in ALL_BLOCKS if block.runner and block.skip_reason is None]
MARKED = [block for block in ALL_BLOCKS if block.marker is not None]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("examples")
    for name in WORKSPACE_LINKS:
        (folder / name).symlink_to(ROOT / name, target_is_directory=True)
    return folder


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``make serve`` as the examples expect it: the shipped models, default settings."""
    with live_server(
        SHIPPED_MODELS, tmp_path_factory.mktemp("server"), {"models": SERVED_MODELS}
    ) as running:
        yield running


@pytest.fixture(scope="module")
def demo_first_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(
        SHIPPED_MODELS, tmp_path_factory.mktemp("demo-first"), {"models": DEMO_FIRST}
    ) as running:
        yield running


def example_environment() -> dict[str, str]:
    """A user's shell: this environment's ``camserve`` and ``python`` first on the PATH, no
    CAMSERVE_* variables, one torch thread (as every server the tests start)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("CAMSERVE_") and key not in TERMINAL_VARIABLES
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(server_environment())
    return env


def run_block(block: Block, workspace: Path, port: int | None) -> subprocess.CompletedProcess[str]:
    code = block.text
    if port is not None:
        for address in README_ADDRESSES:
            code = code.replace(address, f"127.0.0.1:{port}")
    if block.runner == "bash":
        command = ["bash", "-c", "set -euo pipefail\n" + CURL_WITH_FAIL + code]
    else:
        command = [sys.executable, "-c", code]
    return subprocess.run(
        command,
        cwd=workspace,
        env=example_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_S,
        check=False,
    )


def files_in(workspace: Path) -> dict[str, int]:
    """The files under ``workspace`` (the repository's folders linked into it left out),
    relative to it, with the time each was last written, in nanoseconds."""
    found: dict[str, int] = {}
    for folder, subfolders, files in os.walk(workspace):
        if Path(folder) == workspace:
            subfolders[:] = [name for name in subfolders if name not in WORKSPACE_LINKS]
        for name in files:
            path = Path(folder) / name
            found[path.relative_to(workspace).as_posix()] = path.stat().st_mtime_ns
    return found


def left_to_git_status(paths: set[str]) -> list[str]:
    """Those of ``paths`` (relative to the repository root) that ``git status`` would list:
    neither ignored by the .gitignore nor a file the repository ships (an example may
    regenerate one, as docs/cvat.md's does ``function.yaml``)."""
    if not paths:
        return []
    listed = "\n".join(sorted(paths))
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", "--stdin"],
        cwd=ROOT,
        input=listed,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()
    shipped = subprocess.run(
        ["git", "ls-files", "--", *sorted(paths)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return sorted(paths - set(ignored) - set(shipped))


@pytest.mark.parametrize("block", RUNNABLE, ids=[block.where for block in RUNNABLE])
def test_example_runs_as_written(
    block: Block, workspace: Path, request: pytest.FixtureRequest
) -> None:
    """It exits with 0, and whatever it writes would leave ``git status`` of a checkout clean
    if run from its root (in an ignored folder such as ``out/``)."""
    needs_server = any(address in block.text for address in README_ADDRESSES)
    running: LiveServer | None = request.getfixturevalue("server") if needs_server else None
    before = files_in(workspace)
    outcome = run_block(block, workspace, running.port if running else None)
    server_log = f"\nserver log:\n{running.log()}" if running else ""
    assert outcome.returncode == 0, (
        f"{block.where} exited with {outcome.returncode}\n{block.text}\n"
        f"stdout:\n{outcome.stdout[-4000:]}\nstderr:\n{outcome.stderr[-4000:]}{server_log}"
    )
    written = {path for path, time in files_in(workspace).items() if before.get(path) != time}
    stray = left_to_git_status(written)
    assert not stray, f"{block.where} writes {stray[:5]} where git status would list them"


CLIENT_BLOCKS = [block for block in RUNNABLE if block.document.name == "client.md"]


@pytest.mark.parametrize("block", CLIENT_BLOCKS, ids=[block.where for block in CLIENT_BLOCKS])
def test_client_examples_run_whatever_the_default_model(
    block: Block, workspace: Path, demo_first_server: LiveServer
) -> None:
    """docs/client.md's examples name the models they use, so they run against a server whose
    default is another model: here ``shapes``, the first of CAMSERVE_MODELS."""
    listing = httpx.get(demo_first_server.url("/v1/models")).json()
    assert listing["default_model"] == "shapes"
    assert [model["name"] for model in listing["models"]] == DEMO_FIRST.split(",")
    outcome = run_block(block, workspace, demo_first_server.port)
    assert outcome.returncode == 0, (
        f"{block.where} exited with {outcome.returncode}\n"
        f"stdout:\n{outcome.stdout[-4000:]}\nstderr:\n{outcome.stderr[-4000:]}"
    )


def test_the_readme_and_every_manual_page_have_runnable_examples() -> None:
    """The README's request examples, and the pages whose subject is a way to call camserve,
    are run, not marked away."""
    run_documents = {block.document.relative_to(ROOT).as_posix() for block in RUNNABLE}
    assert {
        "README.md",
        "docs/api.md",
        "docs/client.md",
        "docs/cli.md",
        "docs/engine.md",
        "docs/models.md",
        "docs/datasets.md",
        "docs/v2.md",
    } <= run_documents
    readme = {block.runner for block in RUNNABLE if block.document.name == "README.md"}
    assert readme == {"bash", "python"}


def test_every_example_not_run_says_why() -> None:
    for block in MARKED:
        assert block.skip_reason, (
            f"{block.where}: write the marker as <!-- example: not run (reason) -->, "
            f"got {block.marker!r}"
        )
        assert block.runner, f"{block.where}: the marker stands before a {block.language!r} block"


def test_markers_stand_right_before_a_block() -> None:
    """A marker that is not followed by a fenced block would mark nothing."""
    for document in DOCUMENTS:
        markers = sum(1 for line in document.read_text().splitlines() if MARKER_START.match(line))
        marked = sum(1 for block in MARKED if block.document == document)
        assert markers == marked, f"{document.relative_to(ROOT)}: a marker before no block"


UNPUBLISHED = re.compile(r"(?<![\w/.-])camserve(?:-client)?(?![\w/.\[*-])")
"""A bare requirement on camserve or its client: neither is on a package index."""


def test_install_lines_install_what_the_clone_builds() -> None:
    """``pip install camserve-client`` fails: both packages are built from the clone (``make
    wheels``), so an install line names a wheel in dist/, the clone itself, or an extra of an
    installed camserve."""
    for block in ALL_BLOCKS:
        for line in block.text.splitlines():
            command = line.split("#", 1)[0]
            if "pip install" in command:
                bare = UNPUBLISHED.findall(command.split("pip install", 1)[1])
                assert not bare, f"{block.where}: {line.strip()!r} installs {bare} by name"


TOML_BLOCKS = [block for block in ALL_BLOCKS if block.language == "toml"]


@pytest.mark.parametrize("block", TOML_BLOCKS, ids=[block.where for block in TOML_BLOCKS])
def test_manifest_examples_are_valid_manifests(block: Block, tmp_path: Path) -> None:
    """Each TOML example is a manifest camserve accepts (files it names aside); one headed by
    a shipped manifest's path sets what that file sets."""
    fields = tomllib.loads(block.text)
    spec = ModelSpec.model_validate({**fields, "source_dir": tmp_path})
    assert spec.name == fields["name"]
    heading = re.match(r"#\s*(models/[\w.-]+\.toml)\b", block.text)
    shipped = ROOT / heading[1] if heading else None
    if shipped is not None and shipped.exists():
        actual = tomllib.loads(shipped.read_text())
        assert {key: actual.get(key) for key in fields} == fields, block.where


def heading_anchors(document: Path) -> set[str]:
    """The anchors GitHub gives the document's headings."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    text = re.sub(r"^\s*```.*?^\s*```[^\n]*$", "", document.read_text(), flags=re.M | re.S)
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)(?:\s+\"[^\"]*\")?\)")


@pytest.mark.parametrize(
    "document", DOCUMENTS, ids=[d.relative_to(ROOT).as_posix() for d in DOCUMENTS]
)
def test_relative_links_reach_their_files_and_headings(document: Path) -> None:
    for target in LINK.findall(outside_code(document)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue
        path_part, _, anchor = target.partition("#")
        linked = (document.parent / path_part).resolve() if path_part else document
        assert linked.exists(), f"{document.relative_to(ROOT)}: {target} leads nowhere"
        if anchor:
            assert linked.suffix == ".md", f"{document.relative_to(ROOT)}: {target}"
            assert anchor in heading_anchors(linked), (
                f"{document.relative_to(ROOT)}: {target}: no such heading in {linked.name}"
            )


DETECTIONS_SENTENCE = re.compile(
    r"The first prints (?P<count>\w+) detections, best first: (?P<labels>[^.]*?)\. The "
    r"(?P<first>\w+) scores (?P<score>[\d.]+); the (?P<boxed>\w+)'s box runs from about "
    r"\((?P<x0>\d+), (?P<y0>\d+)\) to \((?P<x1>\d+), (?P<y1>\d+)\)\."
)
BOX_PIXELS = 1.0
"""How far "about (x, y)" may be from the box's corner: the page writes whole pixels."""
NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def test_the_detector_sentence_of_the_api_page_is_what_the_server_answers(
    server: LiveServer,
) -> None:
    """docs/api.md says what its detector example prints: the labels in order, the first
    detection's score (to the digits written) and the circle's box (to the pixel)."""
    text = " ".join((ROOT / "docs" / "api.md").read_text().split())
    said = DETECTIONS_SENTENCE.search(text)
    assert said is not None, "docs/api.md: the sentence after the detector example"
    scene = ROOT / "app/camserve/web/static/samples/shapes-detector/scene-1.jpg"
    answer = httpx.post(
        server.url("/v1/explain"),
        params={"model": "shapes-detector", "max_detections": 3, "include": "boxes"},
        files={"image": scene.read_bytes()},
        timeout=BLOCK_TIMEOUT_S,
    ).json()
    detections = answer["detections"]
    labels = [re.sub(r"^(a|the|another) ", "", part) for part in said["labels"].split(", ")]
    assert labels == [detection["label"] for detection in detections], detections
    assert NUMBERS[said["count"]] == len(detections)
    first = detections[0]
    assert said["first"] == first["label"]
    digits = len(said["score"].split(".")[1])
    assert f"{first['score']:.{digits}f}" == said["score"], first
    boxed = next(d for d in detections if d["label"] == said["boxed"])
    box = [boxed[key] for key in ("x0", "y0", "x1", "y1")]
    written = [float(said[key]) for key in ("x0", "y0", "x1", "y1")]
    assert_within(box, written, BOX_PIXELS, msg=f"{boxed} against docs/api.md's {written}")
