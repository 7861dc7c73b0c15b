"""The server's listening sockets, bound before any model loads: a port that another program
holds ends the start at once with one plain sentence, instead of after loading, in a log line.

The sockets are bound as asyncio's ``create_server`` binds them for uvicorn (every address the
host resolves to, ``SO_REUSEADDR``, IPv6 sockets IPv6-only) and listen at once, so that no other
program can take the port between this check and the moment uvicorn serves on them.
"""

from __future__ import annotations

import errno
import socket
from contextlib import suppress

from camserve.api.startup_report import other_port
from camserve.engine.errors import CamserveError

__all__ = ["ListenError", "listening_sockets", "port_taken_message"]

BACKLOG = 2048
"""Connections the kernel queues before they are accepted (uvicorn's default backlog)."""


class ListenError(CamserveError):
    """The server cannot listen where the settings ask: the port is taken, the address is not
    this machine's, or the host name does not resolve."""

    code = "cannot_listen"


def port_taken_message(host: str, port: int) -> str:
    """The one line people read when another program already listens on ``port``."""
    other = other_port(port)
    return (
        f"port {port} on {host} is already in use by another program; choose another port: "
        f"CAMSERVE_PORT={other} make serve (or camserve serve --port {other})"
    )


def listening_sockets(host: str, port: int, backlog: int = BACKLOG) -> list[socket.socket]:
    """Sockets bound to every address of ``host`` (all interfaces when empty) at ``port``, each
    listening; ``ListenError`` with a sentence for people when any of them cannot be."""
    try:
        addresses = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as error:
        raise ListenError(f"cannot listen on {host!r}: {error.strerror}") from error
    bound: list[socket.socket] = []
    try:
        for family, kind, protocol, _, address in dict.fromkeys(addresses):
            bound.append(_listening_socket(family, kind, protocol, address, backlog))
    except OSError as error:
        for sock in bound:
            sock.close()
        if error.errno == errno.EADDRINUSE:
            raise ListenError(port_taken_message(host, port)) from error
        raise ListenError(f"cannot listen on {host}:{port}: {error.strerror}") from error
    return bound


def _listening_socket(
    family: int, kind: int, protocol: int, address: tuple[object, ...], backlog: int
) -> socket.socket:
    sock = socket.socket(family, kind, protocol)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock
