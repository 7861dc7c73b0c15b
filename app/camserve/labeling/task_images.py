"""From the image reference in a Label Studio task to the image's bytes, fetched safely.

A task names its image in one of these ways, and each is fetched (or refused) here:

* ``/data/upload/…``, ``/data/…``, ``/storage-data/…``, ``/tasks/<id>/presign/…`` — paths on
  the Label Studio server, fetched from the configured Label Studio URL with its API key (a
  legacy token goes as ``Token <key>``; a personal access token, a JWT refresh token, is first
  exchanged at ``/api/token/refresh/`` for a short-lived access token sent as ``Bearer``);
* ``/data/local-files/?d=<path>`` — a file read from disk under the local files root (Label
  Studio's ``LOCAL_FILES_DOCUMENT_ROOT``), never from outside it;
* ``http://`` and ``https://`` URLs — fetched directly, but only from public addresses, Label
  Studio's own origin and what ``CAMSERVE_TASK_IMAGE_ALLOW`` opens (see ``destinations``; the
  check holds for every redirect hop, after DNS resolution); the API key only ever goes to
  Label Studio's own origin, and only when the reference started there;
* ``data:image/…;base64,…`` — decoded in place;
* cloud URIs (``s3://``, ``gs://``, ``azure-blob://``, ``azure-spi://``) — through Label Studio's
  presign endpoint for the task, which answers with the file or a redirect to a signed URL.

Everything else (``file://``, ``ftp://``, bare paths, ``..`` segments) is refused. Every
download runs under one deadline, follows at most ``MAX_REDIRECTS`` redirects, and stops
reading as soon as the body passes the size limit.
"""

from __future__ import annotations

import asyncio
import base64
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

import httpcore
import httpx

from camserve.engine.errors import CamserveError
from camserve.labeling.bounded_reads import (
    decode_data_uri,
    describe_url,
    inside_root,
    read_limited,
    read_limited_file,
)
from camserve.labeling.destinations import ALLOW_SETTING, DestinationPolicy
from camserve.labeling.guarded_transport import (
    DestinationGuard,
    DestinationRefusedError,
    GuardedTransport,
)
from camserve.labeling.label_studio_tokens import LabelStudioCredentials
from camserve.labeling.task_image_errors import (
    ImageDestinationRefusedError,
    ImageFetchFailedError,
    ImageFetchTimeoutError,
    ImageReferenceRefusedError,
    TaskImageError,
)

__all__ = [
    "CLOUD_SCHEMES",
    "MAX_REDIRECTS",
    "ImageDestinationRefusedError",
    "ImageFetchFailedError",
    "ImageFetchTimeoutError",
    "ImageReferenceRefusedError",
    "ImageSourceConfig",
    "TaskImageError",
    "TaskImageFetcher",
]

MAX_REDIRECTS = 5
CLOUD_SCHEMES = frozenset({"s3", "gs", "azure-blob", "azure-spi"})
LABEL_STUDIO_PREFIXES = ("/data/", "/storage-data/")
PRESIGN_PATH = re.compile(r"/tasks/\d+/presign/?")
LOCAL_FILES_PATHS = frozenset({"/data/local-files", "/data/local-files/"})
UPLOAD_PREFIX = "/data/upload/"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class ImageSourceConfig:
    """Where task images may come from, and how much of them camserve accepts."""

    label_studio_url: str | None = None
    """Label Studio's base URL, e.g. ``http://localhost:8080``; None refuses Label Studio paths."""
    label_studio_api_key: str | None = None
    """A legacy token or a personal access token (a JWT refresh token)."""
    local_files_root: Path | None = None
    """Label Studio's ``LOCAL_FILES_DOCUMENT_ROOT``; None refuses ``/data/local-files/``."""
    max_bytes: int = 20 * 1024 * 1024
    timeout_s: float = 10.0
    """The deadline for one download, redirects and token exchange included."""
    allowed_destinations: tuple[str, ...] = ()
    """Hosts, ``host:port``, addresses or CIDR networks opened beside public addresses and
    Label Studio's origin (``CAMSERVE_TASK_IMAGE_ALLOW``)."""

    def __post_init__(self) -> None:
        if self.label_studio_url is not None:
            parts = urlsplit(self.label_studio_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError("the Label Studio URL must be an http:// or https:// URL")
        key = self.label_studio_api_key
        if key is not None and not (key.isascii() and key.isprintable() and " " not in key):
            raise ValueError("the Label Studio API key must be printable ASCII without spaces")
        if self.local_files_root is not None and self.local_files_root.resolve() == Path("/"):
            raise ValueError("the local files root cannot be '/': every file would be readable")
        if self.max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive, got {self.max_bytes}")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {self.timeout_s}")
        self.destination_policy()  # raises ValueError naming a malformed entry

    def destination_policy(self) -> DestinationPolicy:
        """Where images may be fetched from: the allowed destinations and Label Studio."""
        label_studio = None
        if self.label_studio_url is not None:
            url = httpx.URL(self.label_studio_url)
            label_studio = (url.host, url.port or _DEFAULT_PORTS[url.scheme])
        return DestinationPolicy.from_settings(self.allowed_destinations, label_studio)


@dataclass(frozen=True)
class _Download:
    url: httpx.URL
    fallback: httpx.URL | None = None
    """Tried after a 404 (an upload kept in Label Studio's cloud-backed default storage)."""


class TaskImageFetcher:
    """Fetches task images under one configuration, through one pooled HTTP client."""

    def __init__(
        self,
        config: ImageSourceConfig,
        transport: httpx.AsyncBaseTransport | None = None,
        network: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        """``transport`` replaces the guarded one (no connection at all: tests); ``network``
        opens the connections the guard allows (default: sockets)."""
        self._config = config
        guard = DestinationGuard(config.destination_policy(), network)
        self._client = httpx.AsyncClient(
            transport=transport if transport is not None else GuardedTransport(guard),
            timeout=httpx.Timeout(config.timeout_s),
            follow_redirects=False,
            trust_env=False,
            headers={"User-Agent": "camserve"},
        )
        self._label_studio = (
            httpx.URL(config.label_studio_url.rstrip("/") + "/")
            if config.label_studio_url
            else None
        )
        self._credentials = (
            LabelStudioCredentials(config.label_studio_api_key, self._label_studio, self._client)
            if config.label_studio_api_key and self._label_studio is not None
            else None
        )
        self._local_root = config.local_files_root.resolve() if config.local_files_root else None

    async def fetch(self, reference: str, task_id: int | None = None) -> bytes:
        """The bytes of the image ``reference`` names; ``task_id`` is needed for cloud URIs."""
        text = reference.strip()
        if not text:
            raise ImageReferenceRefusedError("the task has an empty image reference")
        if text[:5].lower() == "data:":
            return decode_data_uri(text, self._config.max_bytes)
        parts = urlsplit(text)
        scheme = parts.scheme.lower()
        if scheme in ("http", "https"):
            _refuse_traversal(parts.path, text)
            return await self._download(_Download(_parse_url(text)))
        if scheme in CLOUD_SCHEMES:
            return await self._download(self._presigned(text, scheme, task_id))
        if not scheme and text.startswith("/") and not text.startswith("//"):
            if parts.path in LOCAL_FILES_PATHS:
                return await asyncio.to_thread(self._read_local_file, parts.query)
            return await self._download(self._label_studio_path(text, parts.path))
        raise ImageReferenceRefusedError(_unsupported(text, scheme))

    async def aclose(self) -> None:
        """Close the HTTP client's connections."""
        await self._client.aclose()

    async def __aenter__(self) -> TaskImageFetcher:
        return self

    async def __aexit__(self, *_exc_info: object) -> None:
        await self.aclose()

    # Where a reference leads

    def _label_studio_path(self, text: str, path: str) -> _Download:
        _refuse_traversal(path, text)
        if not (path.startswith(LABEL_STUDIO_PREFIXES) or PRESIGN_PATH.fullmatch(path)):
            raise ImageReferenceRefusedError(
                f"{_shown(text)} is neither a Label Studio data path (/data/…, /storage-data/…, "
                "/tasks/<id>/presign/…) nor a URL"
            )
        fallback = None
        if path.startswith(UPLOAD_PREFIX) and "?" not in text:
            upload_key = quote(unquote(path.removeprefix("/data/")), safe="/")
            fallback = _parse_url(
                self._on_label_studio(text, f"storage-data/uploaded/?filepath={upload_key}")
            )
        return _Download(_parse_url(self._on_label_studio(text, text.lstrip("/"))), fallback)

    def _presigned(self, text: str, scheme: str, task_id: int | None) -> _Download:
        if task_id is None:
            raise ImageReferenceRefusedError(
                f"{_shown(text)} is a cloud storage URI; it can only be fetched through Label "
                "Studio's presign endpoint, which needs the task's id"
            )
        encoded = base64.urlsafe_b64encode(text.encode()).decode()
        return _Download(
            _parse_url(self._on_label_studio(text, f"tasks/{task_id}/presign/?fileuri={encoded}"))
        )

    def _on_label_studio(self, text: str, relative: str) -> str:
        if self._label_studio is None:
            raise ImageReferenceRefusedError(
                f"{_shown(text)} lives on Label Studio, but no Label Studio URL is configured: "
                "set LABEL_STUDIO_URL (Label Studio's address as camserve reaches it) and "
                "LABEL_STUDIO_API_KEY"
            )
        if self._credentials is None:
            raise ImageReferenceRefusedError(
                f"{_shown(text)} lives on Label Studio, but no Label Studio API key is "
                "configured: set LABEL_STUDIO_API_KEY (a personal access token)"
            )
        return str(self._label_studio) + relative

    # Local files

    def _read_local_file(self, query: str) -> bytes:
        if self._local_root is None:
            raise ImageReferenceRefusedError(
                "local files (/data/local-files/) are refused: no local files root is configured; "
                "set LOCAL_FILES_DOCUMENT_ROOT to the folder Label Studio's "
                "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT points at"
            )
        values = parse_qs(query, keep_blank_values=True).get("d")
        relative = values[-1] if values else ""
        path = inside_root(self._local_root, relative)
        return read_limited_file(path, relative, self._config.max_bytes)

    # HTTP

    async def _download(self, download: _Download) -> bytes:
        fallback = download.fallback
        try:
            return await self._download_once(download.url)
        except ImageFetchFailedError as error:
            if fallback is None or error.upstream_status != 404:
                raise
            return await self._download_once(fallback)

    async def _download_once(self, url: httpx.URL) -> bytes:
        shown = describe_url(url)
        try:
            async with asyncio.timeout(self._config.timeout_s):
                return await self._follow_redirects(url)
        except CamserveError:
            raise
        except (TimeoutError, httpx.TimeoutException):
            raise ImageFetchTimeoutError(
                f"{shown} did not deliver the image within {self._config.timeout_s:g} s"
            ) from None
        except httpx.HTTPError as error:
            raise ImageFetchFailedError(f"cannot fetch {shown}: {_reason(error)}") from None

    async def _follow_redirects(self, url: httpx.URL) -> bytes:
        authorized = self._is_label_studio(url)
        for hop in range(MAX_REDIRECTS + 1):
            if url.scheme not in ("http", "https"):
                raise ImageReferenceRefusedError(
                    f"a redirect to a {url.scheme}:// URL is refused; only http(s) is followed"
                )
            send_key = authorized and self._is_label_studio(url)
            headers = await self._auth_headers() if send_key else {}
            request = self._client.build_request("GET", url, headers=headers)
            try:
                response = await self._client.send(request, stream=True)
            except DestinationRefusedError as refused:
                raise _refusal(url, refused, redirected=hop > 0) from None
            try:
                location = response.headers.get("location")
                if response.status_code in REDIRECT_STATUSES and location:
                    url = url.join(location)
                    continue
                self._check_status(response, send_key)
                return await read_limited(response, self._config.max_bytes)
            finally:
                await response.aclose()
        raise ImageFetchFailedError(
            f"more than {MAX_REDIRECTS} redirects, last to {describe_url(url)}"
        )

    def _check_status(self, response: httpx.Response, sent_key: bool) -> None:
        status = response.status_code
        if 200 <= status < 300:
            return
        shown = describe_url(response.url)
        if sent_key and status in (401, 403) and self._credentials is not None:
            self._credentials.forget_access_token()
            raise ImageFetchFailedError(
                f"Label Studio refused camserve's API key for {shown} (HTTP {status})", status
            )
        raise ImageFetchFailedError(f"{shown} answered HTTP {status}", status)

    async def _auth_headers(self) -> dict[str, str]:
        if self._credentials is None:
            return {}
        return {"Authorization": await self._credentials.authorization()}

    def _is_label_studio(self, url: httpx.URL) -> bool:
        return self._label_studio is not None and _origin(url) == _origin(self._label_studio)


def _refusal(
    url: httpx.URL, refused: DestinationRefusedError, *, redirected: bool
) -> ImageDestinationRefusedError:
    """Names the URL and why, never anything of the destination (nothing was sent there)."""
    what = f"the redirect to {describe_url(url)}" if redirected else describe_url(url)
    return ImageDestinationRefusedError(
        f"{what} is refused: it leads to {_article(refused.kind)} {refused.kind} address, and "
        "task images are fetched only from public addresses and Label Studio's own URL; "
        f"{ALLOW_SETTING} allows other hosts or networks"
    )


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _reason(error: httpx.HTTPError) -> str:
    """Why a request failed; the text only of network errors (others may quote headers)."""
    if isinstance(error, httpx.NetworkError) and str(error):
        return f"{type(error).__name__}: {error}"
    return type(error).__name__


def _refuse_traversal(path: str, text: str) -> None:
    """Refuse ``.`` and ``..`` segments (also percent-encoded) and backslashes in a URL path."""
    decoded = unquote(path)
    if "\\" in decoded or any(segment in (".", "..") for segment in decoded.split("/")):
        raise ImageReferenceRefusedError(
            f"{_shown(text)} is refused: its path contains '..', '.' or a backslash"
        )


def _unsupported(text: str, scheme: str) -> str:
    if text.startswith("//"):
        return f"{_shown(text)} is refused: protocol-relative URLs need an http(s) scheme"
    if scheme:
        return (
            f"{scheme}:// image references are refused; use http(s), a Label Studio path, "
            "a local-files path, a data URI or a cloud storage URI"
        )
    return f"{_shown(text)} is refused: bare file paths are never read"


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host.lower(), url.port or _DEFAULT_PORTS.get(url.scheme)


def _shown(text: str) -> str:
    """A reference for a message: without userinfo, query or fragment, and not too long."""
    parts = urlsplit(text)
    host = f"{parts.hostname or ''}:{_port_of(text)}".removesuffix(":")
    prefix = f"{parts.scheme}://{host}" if parts.scheme else ""
    return repr((prefix + parts.path)[:200])


def _port_of(text: str) -> str:
    try:
        return str(urlsplit(text).port or "")
    except ValueError:
        return ""


def _parse_url(text: str) -> httpx.URL:
    try:
        return httpx.URL(text)
    except httpx.InvalidURL:
        raise ImageReferenceRefusedError(f"{_shown(text)} is not a valid URL") from None
