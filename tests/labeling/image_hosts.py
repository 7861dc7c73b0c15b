"""Two HTTP servers on 127.0.0.1 for the task-image tests.

``label_studio_routes`` behave like Label Studio's: uploads behind an API key, the personal
access token exchange, the storage proxy and the presign endpoint. ``elsewhere_routes`` are a
third-party host: an image, bodies too large or too slow, redirects and error statuses. Every
request a host receives is recorded with its ``Authorization`` and ``Host`` headers.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from urllib.parse import parse_qs, urlsplit

from tests.support import image_bytes

LIMIT = 4096
"""The ``max_bytes`` the tests configure; ``IMAGE`` fits in it."""
IMAGE = image_bytes(16, 16)
CLOUD_IMAGE = image_bytes(16, 16, seed=1)
LEGACY_KEY = "0123456789abcdef0123456789abcdef01234567"
SLOW_S = 1.0
DRIP_INTERVAL_S = 0.05
STREAM_FOR_S = 3.0
CHUNK = b"\0" * 65536


def make_jwt(claims: Mapping[str, object]) -> str:
    """A JWT carrying ``claims``; its signature is junk (camserve never checks it)."""

    def segment(value: Mapping[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{segment({'alg': 'HS256', 'typ': 'JWT'})}.{segment(claims)}.c2lnbmF0dXJl"


REFRESH_TOKEN = make_jwt({"token_type": "refresh", "exp": time.time() + 7 * 86400, "user_id": 1})
ACCESS_TOKEN = make_jwt({"token_type": "access", "exp": time.time() + 86400, "user_id": 1})
"""Made when the module is imported: valid for a day, so a long test run never sees it expire
(the tests of expiry make their own short-lived tokens)."""


@dataclass(frozen=True)
class Seen:
    """One request a host received."""

    method: str
    target: str
    """The path with its query, as sent."""
    authorization: str | None
    host_header: str | None = None


Route = Callable[["Host", "_Handler"], None]


@dataclass
class Host:
    """A threaded HTTP server answering ``routes`` (by path, query ignored); 404 elsewhere."""

    routes: Mapping[str, Route]
    seen: list[Seen] = field(default_factory=list)
    peer: Host | None = None
    """The other host, for routes that redirect there."""
    access_token: str = ACCESS_TOKEN
    """What the token refresh route hands out, and the one bearer token accepted."""
    base_url: str = ""

    def url(self, target: str) -> str:
        return self.base_url + target

    def paths_seen(self) -> list[str]:
        return [urlsplit(request.target).path for request in self.seen]

    def answer(self, handler: _Handler) -> None:
        headers = handler.headers
        self.seen.append(
            Seen(handler.command, handler.path, headers.get("Authorization"), headers.get("Host"))
        )
        route = self.routes.get(urlsplit(handler.path).path, _not_found)
        with suppress(BrokenPipeError, ConnectionResetError):  # a client past a size or time limit
            route(self, handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        self.server.host.answer(self)

    def do_POST(self) -> None:
        self.server.host.answer(self)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: the tests assert on ``Host.seen`` instead."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: Host) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.host = host

    def handle_error(self, request: object, client_address: object) -> None:
        """Clients that hang up mid-answer are expected here."""


def host_and_port(host: Host) -> str:
    """``127.0.0.1:<port>``: the host as an allow-list entry."""
    return host.base_url.removeprefix("http://")


@contextmanager
def running(host: Host) -> Iterator[Host]:
    """Serve ``host`` on a free port of 127.0.0.1 until the block ends."""
    server = _Server(host)
    host.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield host
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def send(
    handler: _Handler,
    status: int,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    *,
    length: int | None = None,
) -> None:
    """Answer with ``body``; Content-Length is the body's unless ``length`` says otherwise."""
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body) if length is None else length))
    handler.end_headers()
    handler.wfile.write(body)


def redirect(handler: _Handler, location: str, status: int = 302) -> None:
    send(handler, status, headers={"Location": location})


def _not_found(_host: Host, handler: _Handler) -> None:
    send(handler, 404, b"not found")


def _image(_host: Host, handler: _Handler) -> None:
    send(handler, 200, IMAGE, {"Content-Type": "image/png"})


def _exactly_the_limit(_host: Host, handler: _Handler) -> None:
    send(handler, 200, b"x" * LIMIT)


def _declared_too_large(_host: Host, handler: _Handler) -> None:
    send(handler, 200, b"x" * (LIMIT + 1))


def _undeclared_endless(_host: Host, handler: _Handler) -> None:
    """No Content-Length (HTTP/1.0, the body ends when the connection closes), and no end."""
    handler.send_response(200)
    handler.end_headers()
    stop_at = time.monotonic() + STREAM_FOR_S
    while time.monotonic() < stop_at:
        handler.wfile.write(CHUNK)


def _slow(_host: Host, handler: _Handler) -> None:
    time.sleep(SLOW_S)
    send(handler, 200, IMAGE)


def _dripping(_host: Host, handler: _Handler) -> None:
    """A byte at a time, each in time for a read timeout, the whole far too slow."""
    handler.send_response(200)
    handler.end_headers()
    stop_at = time.monotonic() + STREAM_FOR_S
    while time.monotonic() < stop_at:
        handler.wfile.write(b"x")
        handler.wfile.flush()
        time.sleep(DRIP_INTERVAL_S)


def _status(code: int) -> Route:
    return lambda _host, handler: send(handler, code, b"upstream says no")


def _redirect_to(location: str) -> Route:
    return lambda _host, handler: redirect(handler, location)


def _redirect_to_peer(target: str) -> Route:
    def route(host: Host, handler: _Handler) -> None:
        assert host.peer is not None
        redirect(handler, host.peer.url(target))

    return route


def _authorized(route: Route) -> Route:
    """``route`` behind Label Studio's API key check (401 without an accepted key)."""

    def guarded(host: Host, handler: _Handler) -> None:
        accepted = {f"Token {LEGACY_KEY}", f"Bearer {host.access_token}"}
        if handler.headers.get("Authorization") not in accepted:
            send(handler, 401, b'{"detail": "Authentication credentials were not provided."}')
            return
        route(host, handler)

    return guarded


def _token_refresh(host: Host, handler: _Handler) -> None:
    length = int(handler.headers.get("Content-Length", "0"))
    refresh = json.loads(handler.rfile.read(length) or b"{}").get("refresh")
    if refresh != REFRESH_TOKEN:
        send(handler, 401, b'{"detail": "Token is invalid or expired"}')
        return
    send(handler, 200, json.dumps({"access": host.access_token}).encode())


def _storage_proxy(_host: Host, handler: _Handler) -> None:
    filepath = parse_qs(urlsplit(handler.path).query).get("filepath", [""])[0]
    if filepath == "upload/1/cloud.png":
        send(handler, 200, CLOUD_IMAGE)
    else:
        _not_found(_host, handler)


def _presign(host: Host, handler: _Handler) -> None:
    """Redirect to a signed URL on the other host, as Label Studio does for cloud storage."""
    fileuri = parse_qs(urlsplit(handler.path).query).get("fileuri", [""])[0]
    if base64.urlsafe_b64decode(fileuri) != b"s3://bucket/cat.png":
        _not_found(host, handler)
        return
    assert host.peer is not None
    redirect(handler, host.peer.url("/signed/cat.png?X-Amz-Signature=s3cr3t"), 303)


def elsewhere_routes() -> dict[str, Route]:
    return {
        "/image.png": _image,
        "/signed/cat.png": _image,
        "/exactly-the-limit": _exactly_the_limit,
        "/declared-too-large": _declared_too_large,
        "/undeclared-endless": _undeclared_endless,
        "/slow": _slow,
        "/dripping": _dripping,
        "/missing": _status(404),
        "/broken": _status(500),
        "/loop": _redirect_to("/loop"),
        "/to-image": _redirect_to("/image.png"),
        "/to-a-file": _redirect_to("file:///etc/passwd"),
        "/to-label-studio": _redirect_to_peer("/data/upload/1/cat.png"),
    }


def label_studio_routes() -> dict[str, Route]:
    return {
        "/data/upload/1/cat.png": _authorized(_image),
        "/data/upload/1/moved.png": _authorized(_redirect_to("/data/upload/1/cat.png")),
        "/data/upload/1/elsewhere.png": _authorized(_redirect_to_peer("/image.png")),
        "/storage-data/uploaded/": _authorized(_storage_proxy),
        "/api/token/refresh/": _token_refresh,
        "/tasks/7/presign/": _authorized(_presign),
    }
