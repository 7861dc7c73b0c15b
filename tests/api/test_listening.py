"""The server's sockets, bound before anything loads: listening at once on a free port, and a
sentence for people when the port is taken or the address is not this machine's."""

from __future__ import annotations

import socket

import pytest

from camserve.api.listening import ListenError, listening_sockets, port_taken_message


def test_a_free_port_is_bound_and_accepts_connections_at_once() -> None:
    sockets = listening_sockets("127.0.0.1", 0)
    try:
        assert [sock.family for sock in sockets] == [socket.AF_INET]
        port = sockets[0].getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        for sock in sockets:
            sock.close()


def test_a_taken_port_is_named_with_the_way_to_choose_another() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(ListenError) as caught:
            listening_sockets("127.0.0.1", port)
    assert str(caught.value) == (
        f"port {port} on 127.0.0.1 is already in use by another program; choose another port: "
        "CAMSERVE_PORT=9000 make serve (or camserve serve --port 9000)"
    )


def test_the_port_hint_never_suggests_the_taken_port() -> None:
    assert port_taken_message("0.0.0.0", 9000).endswith(
        "CAMSERVE_PORT=9001 make serve (or camserve serve --port 9001)"
    )


def test_an_address_of_another_machine_is_refused_with_the_reason() -> None:
    with pytest.raises(ListenError, match=r"^cannot listen on 192\.0\.2\.1:8000: .*assign"):
        listening_sockets("192.0.2.1", 8000)
