"""tests/harness/fiftyone_env.py: where FiftyOne's environment is found, the mongod it runs (on
127.0.0.1 only, gone once stopped), and failures inside FiftyOne reported to the caller."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from tests.harness.fiftyone_env import (
    FiftyOne,
    FiftyOneEnv,
    FiftyOneJobError,
    MongoServer,
    fiftyone_required,
    locate_fiftyone,
)
from tests.harness.live_server import LOOPBACK

ROOT = Path(__file__).resolve().parents[2]
CLASHES = {"starlette", "python-dateutil"}
"""The packages whose pins differ between constraints.txt and constraints-fiftyone.txt."""

LISTEN = "0A"
"""A listening socket's state in /proc/net/tcp."""


def fd_target(link: Path) -> str:
    """What an open file descriptor points at; "" for one closed since the folder was read."""
    try:
        return link.readlink().name
    except FileNotFoundError:
        return ""


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """The (IPv4 address, port) of every TCP socket process ``pid`` listens on; IPv6 sockets
    appear as ``("ipv6", port)``."""
    inodes = {
        target.removeprefix("socket:[").removesuffix("]")
        for target in map(fd_target, Path(f"/proc/{pid}/fd").iterdir())
        if target.startswith("socket:[")
    }
    found: list[tuple[str, int]] = []
    for table in ("tcp", "tcp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != LISTEN or inode not in inodes:
                continue
            address, port = local.split(":")
            if table == "tcp6":
                found.append(("ipv6", int(port, 16)))
            else:
                octets = bytes.fromhex(address)[::-1]  # little-endian in the table
                found.append((socket.inet_ntoa(octets), int(port, 16)))
    return found


def test_mongod_listens_on_loopback_only_and_is_gone_once_stopped(
    fiftyone_env: FiftyOneEnv, tmp_path: Path
) -> None:
    mongo = MongoServer(fiftyone_env, tmp_path)
    try:
        port = mongo.server.port
        assert mongo.uri == f"mongodb://{LOOPBACK}:{port}"
        assert listening_addresses(mongo.pid) == [(LOOPBACK, port)]
    finally:
        mongo.stop()
    assert mongo.server.process.poll() == 0  # a clean shutdown, not a kill
    assert not Path(f"/proc/{mongo.pid}").exists()
    assert not mongo.data.exists()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((LOOPBACK, port), timeout=5).close()


def test_a_failing_job_raises_fiftyones_error_and_the_driver_goes_on(fiftyone: FiftyOne) -> None:
    with pytest.raises(FiftyOneJobError, match="no-such-dataset"):
        fiftyone.reader.call("dump", name="no-such-dataset")
    with pytest.raises(FiftyOneJobError, match="KeyError: 'no-such-job'"):
        fiftyone.reader.call("no-such-job")
    with pytest.raises(FiftyOneJobError, match="unexpected keyword argument 'colour'"):
        fiftyone.reader.call("dump", name="x", colour="red")
    with pytest.raises(FiftyOneJobError, match="not found"):
        fiftyone.reader.call("dump", name="still-answering")


def test_the_environment_is_found_where_named_and_required_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("FIFTYONE_VENV", raising=False)
    assert not fiftyone_required()
    assert locate_fiftyone(str(tmp_path)) is None  # an empty folder is no environment
    monkeypatch.setenv("CI", "true")
    assert fiftyone_required()
    monkeypatch.delenv("CI")
    monkeypatch.setenv("FIFTYONE_VENV", str(tmp_path))
    assert fiftyone_required()
    assert locate_fiftyone() is None


def pins(path: Path) -> dict[str, str]:
    """Package (normalised name) → version of a constraints file."""
    found = {}
    for line in path.read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            found[re.sub(r"[-_.]+", "-", name.strip().lower())] = version.strip()
    return found


def test_fiftyone_shares_camserves_pins_except_the_clashes() -> None:
    """The FiftyOne driver imports camserve's engine beside FiftyOne's packages: every package
    both environments hold has one version, except those FiftyOne cannot take."""
    camserve = pins(ROOT / "constraints.txt")
    fiftyone = pins(ROOT / "constraints-fiftyone.txt")
    assert (fiftyone["fiftyone"], fiftyone["fiftyone-db"]) == ("1.22.1", "0.4.5")
    differing = {
        name for name in camserve.keys() & fiftyone.keys() if camserve[name] != fiftyone[name]
    }
    assert differing == CLASHES
