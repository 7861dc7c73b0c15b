"""Stand-ins for the network under the destination guard: a resolver that answers from a table
(and never sends a DNS query), and a network backend that records connection attempts instead
of making them."""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import httpcore
import pytest

SYSTEM_GETADDRINFO = socket.getaddrinfo

AddrInfo = tuple[
    socket.AddressFamily, socket.SocketKind, int, str, tuple[str, int] | tuple[str, int, int, int]
]


@dataclass
class Resolver:
    """``socket.getaddrinfo`` for a test: the names in ``answers`` resolve to their addresses
    (the n-th lookup of a name gets its n-th answer, the last one repeating); any other host
    is parsed as a numeric address only (``AI_NUMERICHOST``), so nothing leaves the machine."""

    answers: Mapping[str, Sequence[Sequence[str]]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> Resolver:
        monkeypatch.setattr(socket, "getaddrinfo", self)
        return self

    def __call__(
        self,
        host: str,
        port: int | str | None,
        family: int = 0,
        type: int = 0,
        proto: int = 0,
        flags: int = 0,
    ) -> list[AddrInfo]:
        self.asked.append(host)
        if host in self.answers:
            successive = self.answers[host]
            addresses = successive[min(self.asked.count(host), len(successive)) - 1]
            return [_addrinfo(address, int(port or 0)) for address in addresses]
        return SYSTEM_GETADDRINFO(host, port, family, type, proto, flags | socket.AI_NUMERICHOST)


def _addrinfo(address: str, port: int) -> AddrInfo:
    if ":" in address:
        return (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))
    return (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))


class RecordingNetwork(httpcore.AsyncNetworkBackend):
    """Records every connection the guard lets through, and makes none (ConnectError)."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.attempts.append((host, port))
        raise httpcore.ConnectError("recorded, not connected")

    async def sleep(self, seconds: float) -> None:
        """Never called: no retries are configured."""
