"""An httpx transport that connects only where the destination policy allows.

httpx hands each new connection's host and port to httpcore's network backend. The backend
here resolves the host once with the system resolver (which also reads numeric spellings such
as ``127.1``, ``2130706433`` or ``0x7f000001``), checks every address it resolves to, and
connects to a checked address itself: nothing looks the name up a second time, so a name that
answers a public address to the check and a private one to the connection (DNS rebinding) gets
nowhere. TLS still verifies the certificate for the URL's host name, and the ``Host`` header is
the URL's, because httpcore sets both from the URL, not from the address connected to.

Each redirect hop is a new request, so each hop's destination is checked the same way (a
pooled connection is only reused for the origin it was opened and checked for).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable

import httpcore
import httpx

from camserve.labeling.destinations import DestinationPolicy

__all__ = ["DestinationGuard", "DestinationRefusedError", "GuardedTransport"]

CONNECTION_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)
"""httpx's own defaults."""


class DestinationRefusedError(Exception):
    """A connection the policy refuses; raised before anything is sent."""

    def __init__(self, host: str, port: int, kind: str) -> None:
        super().__init__(f"{host}:{port} is a {kind} address")
        self.kind = kind


class DestinationGuard(httpcore.AsyncNetworkBackend):
    """Resolves, checks, then connects to a checked address through ``network``."""

    def __init__(
        self, policy: DestinationPolicy, network: httpcore.AsyncNetworkBackend | None = None
    ) -> None:
        self._policy = policy
        self._network = network if network is not None else httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await _resolve(host, port, timeout)
        if not self._policy.trusts_name(host, port):
            for address in addresses:
                kind = self._policy.refusal(ipaddress.ip_address(address.partition("%")[0]), port)
                if kind is not None:
                    raise DestinationRefusedError(host, port, kind)
        failures: list[httpcore.ConnectError | httpcore.ConnectTimeout] = []
        for address in addresses:  # the checked addresses, never the name again
            try:
                return await self._network.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                failures.append(error)
        raise failures[-1]

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise DestinationRefusedError(path, 0, "Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


async def _resolve(host: str, port: int, timeout: float | None) -> list[str]:
    """Every address ``host`` resolves to, in the resolver's order, each once."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout):
            answers = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError:
        raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout} s") from None
    except (socket.gaierror, UnicodeError) as error:
        raise httpcore.ConnectError(str(error)) from None
    addresses = list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in answers))
    if not addresses:
        raise httpcore.ConnectError(f"{host} resolves to no address")
    return addresses


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport (its request handling and error mapping), whose connection pool
    opens connections through a ``DestinationGuard``.

    httpx 0.28 takes no network backend, so the pool it built is replaced by one that has the
    guard; the tests of ``task_images`` fail if a future httpx stops using it."""

    def __init__(self, guard: DestinationGuard) -> None:
        super().__init__(trust_env=False, limits=CONNECTION_LIMITS)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=CONNECTION_LIMITS.max_connections,
            max_keepalive_connections=CONNECTION_LIMITS.max_keepalive_connections,
            keepalive_expiry=CONNECTION_LIMITS.keepalive_expiry,
            network_backend=guard,
        )
