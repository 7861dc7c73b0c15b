"""The destination guard: every kind of non-public destination refused before any connection
attempt, and connections made to the address that was checked. The network under the guard
records attempts instead of making them, and names resolve from a table: nothing here leaves
the machine, or even opens a socket."""

from __future__ import annotations

import asyncio

import pytest

from camserve.labeling.destinations import DestinationPolicy
from camserve.labeling.guarded_transport import DestinationGuard, DestinationRefusedError
from camserve.labeling.task_images import (
    ImageDestinationRefusedError,
    ImageFetchFailedError,
    ImageSourceConfig,
    TaskImageError,
    TaskImageFetcher,
)
from tests.labeling.fake_network import RecordingNetwork, Resolver

PUBLIC = "93.184.215.14"
NAMES = {
    "public.test": [[PUBLIC]],
    "internal.test": [["10.20.30.40"]],
    "metadata.test": [["169.254.169.254"]],
    "mixed.test": [[PUBLIC, "192.168.1.20"]],
    "six.test": [["2606:4700:4700::1111", "fd00::20"]],
}


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    return Resolver(NAMES).install(monkeypatch)


def attempt(
    url: str, config: ImageSourceConfig | None = None
) -> tuple[TaskImageError, RecordingNetwork]:
    """Fetch ``url`` over a recording network: the error, and the attempts the guard let by."""
    network = RecordingNetwork()

    async def fetch() -> TaskImageError:
        async with TaskImageFetcher(config or ImageSourceConfig(), network=network) as fetcher:
            with pytest.raises(TaskImageError) as caught:
                await fetcher.fetch(url)
            return caught.value

    return asyncio.run(fetch()), network


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("http://127.0.0.1:8000/metrics", "loopback"),
        ("http://127.1:8000/metrics", "loopback"),
        ("http://2130706433/", "loopback"),
        ("http://0x7f000001/", "loopback"),
        ("http://[::ffff:127.0.0.1]:8000/metrics", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://0.0.0.0:8000/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://10.0.0.1/", "private"),
        ("http://172.16.0.1/", "private"),
        ("http://192.168.0.1/", "private"),
        ("http://[fc00::1]/", "private"),
        ("http://[fd12:3456::1]/", "private"),
        ("https://100.64.0.1/", "shared (carrier-grade NAT)"),
        ("http://224.0.0.251/", "multicast"),
        ("http://[ff02::1]/", "multicast"),
        ("http://240.0.0.1/", "reserved"),
        ("http://192.0.2.1/", "reserved"),
        ("http://[64:ff9b::a9fe:a9fe]/", "link-local"),
        ("http://[2002:a00:1::1]/", "tunnelled non-public"),
        ("http://internal.test/cat.png", "private"),
        ("http://metadata.test/latest/meta-data/", "link-local"),
        ("http://mixed.test/cat.png", "private"),
        ("https://six.test/cat.png", "private"),
    ],
)
def test_non_public_destinations_are_refused_unconnected(
    resolver: Resolver, url: str, kind: str
) -> None:
    error, network = attempt(url)
    assert isinstance(error, ImageDestinationRefusedError)
    assert error.code == "image_destination_refused"
    assert f"a {kind} address" in str(error) or f"an {kind} address" in str(error)
    assert "CAMSERVE_TASK_IMAGE_ALLOW" in str(error)
    assert network.attempts == []


@pytest.mark.parametrize("url", [f"http://{PUBLIC}/cat.png", "http://public.test/cat.png"])
def test_a_public_destination_is_connected_to_by_its_checked_address(
    resolver: Resolver, url: str
) -> None:
    """The recording network sees the address, never the name: there is no second lookup."""
    error, network = attempt(url)
    assert isinstance(error, ImageFetchFailedError)
    assert "ConnectError" in str(error)
    assert network.attempts == [(PUBLIC, 80)]


@pytest.mark.parametrize(
    ("url", "connected"),
    [
        ("http://internal.test/cat.png", ("10.20.30.40", 80)),
        ("http://10.1.1.1:8080/cat.png", ("10.1.1.1", 8080)),
        ("http://[::ffff:10.1.1.1]:8080/cat.png", ("::ffff:10.1.1.1", 8080)),
        ("http://metadata.test/cat.png", ("169.254.169.254", 80)),
    ],
)
def test_allowed_networks_and_names_pass_the_guard(
    resolver: Resolver, url: str, connected: tuple[str, int]
) -> None:
    config = ImageSourceConfig(allowed_destinations=("10.0.0.0/8", "metadata.test:80"))
    error, network = attempt(url, config)
    assert isinstance(error, ImageFetchFailedError)
    assert network.attempts == [connected]


def test_a_name_allowed_on_one_port_is_refused_on_another(resolver: Resolver) -> None:
    config = ImageSourceConfig(allowed_destinations=("metadata.test:80",))
    error, network = attempt("http://metadata.test:8080/latest/meta-data/", config)
    assert isinstance(error, ImageDestinationRefusedError)
    assert network.attempts == []


@pytest.mark.parametrize(
    "spelling", ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "0x7f.1", "017700000001"]
)
def test_numeric_spellings_of_loopback_are_refused(resolver: Resolver, spelling: str) -> None:
    """The resolver reads them as inet_aton does (``0177`` is octal), and the guard judges what
    it read; httpx refuses some of them in a URL already, the guard needs no URL."""
    network = RecordingNetwork()
    guard = DestinationGuard(DestinationPolicy(), network)
    with pytest.raises(DestinationRefusedError) as caught:
        asyncio.run(guard.connect_tcp(spelling, 80))
    assert caught.value.kind == "loopback"
    assert network.attempts == []
    assert resolver.asked == [spelling]


def test_a_unix_socket_is_refused() -> None:
    guard = DestinationGuard(DestinationPolicy(), RecordingNetwork())
    with pytest.raises(DestinationRefusedError):
        asyncio.run(guard.connect_unix_socket("/run/docker.sock"))
