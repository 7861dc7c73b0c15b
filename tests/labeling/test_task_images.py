"""Task images: every reference form fetched to the exact bytes, and every unsafe one refused."""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from camserve.labeling.task_images import (
    MAX_REDIRECTS,
    ImageDestinationRefusedError,
    ImageFetchFailedError,
    ImageFetchTimeoutError,
    ImageReferenceRefusedError,
    ImageSourceConfig,
    TaskImageFetcher,
)
from camserve.serving.errors import PayloadTooLargeError
from tests.integration.live import free_port
from tests.labeling.fake_network import Resolver
from tests.labeling.image_hosts import (
    ACCESS_TOKEN,
    CLOUD_IMAGE,
    IMAGE,
    LEGACY_KEY,
    LIMIT,
    REFRESH_TOKEN,
    SLOW_S,
    STREAM_FOR_S,
    Host,
    elsewhere_routes,
    host_and_port,
    label_studio_routes,
    make_jwt,
    running,
)

TIMEOUT_S = 0.3
"""The read timeout of the tests about slow hosts."""
PATIENT_TIMEOUT_S = 10.0
"""Every other test's: a busy machine must not turn a quick local answer into a timeout."""
LOCAL_IMAGE = b"\x89PNG local image bytes"
SECRET = b"the secret outside the root"


@pytest.fixture
def hosts() -> Iterator[tuple[Host, Host]]:
    """(Label Studio, a third-party host), each knowing the other."""
    label_studio, elsewhere = Host(label_studio_routes()), Host(elsewhere_routes())
    label_studio.peer, elsewhere.peer = elsewhere, label_studio
    with running(label_studio), running(elsewhere):
        yield label_studio, elsewhere


@pytest.fixture
def label_studio(hosts: tuple[Host, Host]) -> Host:
    return hosts[0]


@pytest.fixture
def elsewhere(hosts: tuple[Host, Host]) -> Host:
    return hosts[1]


@pytest.fixture
def local_root(tmp_path: Path) -> Path:
    """``root/images/cat.png`` inside, ``secret.png`` beside the root, outside it."""
    root = tmp_path / "root"
    (root / "images").mkdir(parents=True)
    (root / "images" / "cat.png").write_bytes(LOCAL_IMAGE)
    (tmp_path / "secret.png").write_bytes(SECRET)
    return root


def config_for(
    label_studio: Host | None = None, allow: Iterable[Host] = (), **overrides: Any
) -> ImageSourceConfig:
    """Label Studio's URL and key from ``label_studio``; the hosts in ``allow`` opened by
    address and port (every test host is on 127.0.0.1, refused by default)."""
    values: dict[str, Any] = {
        "max_bytes": LIMIT,
        "timeout_s": PATIENT_TIMEOUT_S,
        "allowed_destinations": tuple(host_and_port(host) for host in allow),
    }
    if label_studio is not None:
        values.update(label_studio_url=label_studio.base_url, label_studio_api_key=LEGACY_KEY)
    values.update(overrides)
    return ImageSourceConfig(**values)


def fetch(config: ImageSourceConfig, *references: str, task_id: int | None = None) -> list[bytes]:
    """Fetch ``references`` one after the other with one fetcher (one event loop)."""

    async def fetch_all() -> list[bytes]:
        async with TaskImageFetcher(config) as fetcher:
            return [await fetcher.fetch(reference, task_id) for reference in references]

    return asyncio.run(fetch_all())


def fetch_one(config: ImageSourceConfig, reference: str, task_id: int | None = None) -> bytes:
    return fetch(config, reference, task_id=task_id)[0]


def local_reference(relative: str) -> str:
    return f"/data/local-files/?d={relative}"


# Plain http(s) URLs


def test_an_http_url_gives_the_image_and_no_key(label_studio: Host, elsewhere: Host) -> None:
    assert (
        fetch_one(config_for(label_studio, allow=[elsewhere]), elsewhere.url("/image.png")) == IMAGE
    )
    assert [request.authorization for request in elsewhere.seen] == [None]


def test_a_redirect_is_followed(elsewhere: Host) -> None:
    assert fetch_one(config_for(allow=[elsewhere]), elsewhere.url("/to-image")) == IMAGE
    assert elsewhere.paths_seen() == ["/to-image", "/image.png"]


def test_a_redirect_loop_is_cut_off(elsewhere: Host) -> None:
    with pytest.raises(ImageFetchFailedError, match=f"more than {MAX_REDIRECTS} redirects"):
        fetch_one(config_for(allow=[elsewhere]), elsewhere.url("/loop"))
    assert elsewhere.paths_seen() == ["/loop"] * (MAX_REDIRECTS + 1)


def test_a_redirect_to_a_file_url_is_refused(elsewhere: Host) -> None:
    with pytest.raises(ImageReferenceRefusedError, match=r"redirect to a file:// URL") as caught:
        fetch_one(config_for(allow=[elsewhere]), elsewhere.url("/to-a-file"))
    assert caught.value.code == "image_reference_refused"


@pytest.mark.parametrize("status", [404, 500])
def test_an_upstream_error_status_fails_the_fetch(elsewhere: Host, status: int) -> None:
    path = {404: "/missing", 500: "/broken"}[status]
    with pytest.raises(ImageFetchFailedError) as caught:
        fetch_one(config_for(allow=[elsewhere]), elsewhere.url(path))
    assert caught.value.code == "image_fetch_failed"
    assert caught.value.upstream_status == status
    assert str(caught.value) == f"{elsewhere.url(path)} answered HTTP {status}"


def test_a_body_of_exactly_the_limit_is_accepted(elsewhere: Host) -> None:
    assert (
        fetch_one(config_for(allow=[elsewhere]), elsewhere.url("/exactly-the-limit"))
        == b"x" * LIMIT
    )


def test_a_declared_oversize_body_is_refused_before_reading(elsewhere: Host) -> None:
    with pytest.raises(PayloadTooLargeError, match=f"declares {LIMIT + 1} bytes") as caught:
        fetch_one(config_for(allow=[elsewhere]), elsewhere.url("/declared-too-large"))
    assert caught.value.code == "payload_too_large"


def test_an_endless_body_without_length_is_cut_off_at_the_limit(elsewhere: Host) -> None:
    """The server would stream for seconds; the download stops at the first chunk past it."""
    started = time.monotonic()
    with pytest.raises(PayloadTooLargeError, match=f"sent more than the {LIMIT}-byte limit"):
        fetch_one(
            config_for(timeout_s=5.0, allow=[elsewhere]), elsewhere.url("/undeclared-endless")
        )
    assert time.monotonic() - started < STREAM_FOR_S - 1.0


def test_the_content_length_is_checked_before_any_body_is_read() -> None:
    chunks_read: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        chunks_read.append(1)
        yield b"x"

    def handler(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Length": str(10**9)}, content=body())

    async def attempt() -> None:
        async with TaskImageFetcher(config_for(), httpx.MockTransport(handler)) as fetcher:
            await fetcher.fetch("https://images.example/huge.png")

    with pytest.raises(PayloadTooLargeError, match=r"https://images.example/huge.png"):
        asyncio.run(attempt())
    assert chunks_read == []


def test_a_slow_answer_times_out(elsewhere: Host) -> None:
    started = time.monotonic()
    with pytest.raises(ImageFetchTimeoutError, match=f"within {TIMEOUT_S:g} s") as caught:
        fetch_one(config_for(allow=[elsewhere], timeout_s=TIMEOUT_S), elsewhere.url("/slow"))
    assert time.monotonic() - started < SLOW_S
    assert caught.value.code == "image_fetch_timeout"
    assert isinstance(caught.value, TimeoutError)


def test_a_dripping_body_hits_the_overall_deadline(elsewhere: Host) -> None:
    """Each byte comes well within the read timeout; the whole download still has a deadline."""
    started = time.monotonic()
    with pytest.raises(ImageFetchTimeoutError):
        fetch_one(config_for(allow=[elsewhere], timeout_s=TIMEOUT_S), elsewhere.url("/dripping"))
    assert TIMEOUT_S <= time.monotonic() - started < STREAM_FOR_S - 1.0


def test_a_closed_port_fails_the_fetch() -> None:
    port = free_port()
    config = config_for(allowed_destinations=(f"127.0.0.1:{port}",))
    with pytest.raises(ImageFetchFailedError, match="ConnectError") as caught:
        fetch_one(config, f"http://127.0.0.1:{port}/image.png")
    assert caught.value.upstream_status is None


def test_credentials_and_query_stay_out_of_messages(elsewhere: Host) -> None:
    url = elsewhere.url("/missing?X-Amz-Signature=s3cr3t").replace("//", "//user:pa55w0rd@", 1)
    with pytest.raises(ImageFetchFailedError) as caught:
        fetch_one(config_for(allow=[elsewhere]), url)
    assert "/missing answered HTTP 404" in str(caught.value)
    assert "s3cr3t" not in str(caught.value)
    assert "pa55w0rd" not in str(caught.value)


@pytest.mark.parametrize(
    "path", ["/a/../image.png", "/a/%2e%2e/image.png", "/a/..%2Fimage.png", "/a/..%5cimage.png"]
)
def test_dot_segments_in_a_url_are_refused(elsewhere: Host, path: str) -> None:
    with pytest.raises(ImageReferenceRefusedError, match=r"contains '\.\.', '\.' or a backslash"):
        fetch_one(config_for(allow=[elsewhere]), elsewhere.url(path))
    assert elsewhere.seen == []


# Destinations: public addresses, Label Studio's own origin, and what is allowed


def test_a_loopback_url_is_refused_by_default_and_nothing_is_sent(elsewhere: Host) -> None:
    url = elsewhere.url("/image.png")
    with pytest.raises(ImageDestinationRefusedError) as caught:
        fetch_one(config_for(), url)
    assert caught.value.code == "image_destination_refused"
    assert str(caught.value) == (
        f"{url} is refused: it leads to a loopback address, and task images are fetched only "
        "from public addresses and Label Studio's own URL; CAMSERVE_TASK_IMAGE_ALLOW allows "
        "other hosts or networks"
    )
    assert elsewhere.seen == []


def test_a_loopback_url_is_served_once_its_address_and_port_are_allowed(elsewhere: Host) -> None:
    assert fetch_one(config_for(allow=[elsewhere]), elsewhere.url("/image.png")) == IMAGE


def test_a_redirect_to_a_port_not_allowed_is_refused(label_studio: Host, elsewhere: Host) -> None:
    """``label_studio`` is only another loopback server here (no Label Studio URL is set)."""
    with pytest.raises(ImageDestinationRefusedError) as caught:
        fetch_one(config_for(allow=[elsewhere]), elsewhere.url("/to-label-studio"))
    target = label_studio.url("/data/upload/1/cat.png")
    assert str(caught.value).startswith(f"the redirect to {target} is refused: it leads to a loop")
    assert "401" not in str(caught.value)
    assert elsewhere.paths_seen() == ["/to-label-studio"]
    assert label_studio.seen == []


def test_label_studio_s_own_origin_needs_no_allowing(label_studio: Host, elsewhere: Host) -> None:
    config = config_for(label_studio)
    assert fetch_one(config, label_studio.url("/data/upload/1/cat.png")) == IMAGE
    with pytest.raises(ImageDestinationRefusedError, match="loopback"):
        fetch_one(config, elsewhere.url("/image.png"))
    assert elsewhere.seen == []


def test_a_host_name_resolving_to_loopback_is_refused(
    elsewhere: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    Resolver({"images.test": [["127.0.0.1"]]}).install(monkeypatch)
    url = elsewhere.url("/image.png").replace("127.0.0.1", "images.test")
    with pytest.raises(ImageDestinationRefusedError, match="leads to a loopback address"):
        fetch_one(config_for(), url)
    assert elsewhere.seen == []


def test_a_name_is_resolved_once_and_the_checked_address_is_used(
    elsewhere: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name answers an allowed address to the check and a private one afterwards (DNS
    rebinding): the request goes to the checked address, with the name as its Host header, and
    the next connection is checked again on the new answer."""
    resolver = Resolver({"images.test": [["127.0.0.1"], ["10.0.0.1"]]}).install(monkeypatch)
    url = elsewhere.url("/image.png").replace("127.0.0.1", "images.test")
    config = config_for(allow=[elsewhere])

    async def fetch_twice() -> tuple[bytes, Exception]:
        async with TaskImageFetcher(config) as fetcher:
            first = await fetcher.fetch(url)
            with pytest.raises(ImageDestinationRefusedError, match="a private address") as caught:
                await fetcher.fetch(url)
            return first, caught.value

    first, _ = asyncio.run(fetch_twice())
    assert first == IMAGE
    assert resolver.asked.count("images.test") == 2
    assert [request.host_header for request in elsewhere.seen] == [urlsplit(url).netloc]


def test_an_allowed_host_name_is_trusted_whatever_it_resolves_to(
    elsewhere: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    Resolver({"images.test": [["127.0.0.1"]]}).install(monkeypatch)
    url = elsewhere.url("/image.png").replace("127.0.0.1", "images.test")
    port = urlsplit(url).port
    assert fetch_one(config_for(allowed_destinations=(f"images.test:{port}",)), url) == IMAGE


# Label Studio paths and its API key


def test_an_upload_is_fetched_with_the_legacy_token(label_studio: Host) -> None:
    assert fetch_one(config_for(label_studio), "/data/upload/1/cat.png") == IMAGE
    assert [(r.target, r.authorization) for r in label_studio.seen] == [
        ("/data/upload/1/cat.png", f"Token {LEGACY_KEY}")
    ]


def test_an_upload_under_a_label_studio_subpath_keeps_the_subpath(elsewhere: Host) -> None:
    config = config_for(label_studio_url=elsewhere.url("/ls/"), label_studio_api_key="k")
    with pytest.raises(ImageFetchFailedError, match="answered HTTP 404"):
        fetch_one(config, "/data/upload/1/cat.png")
    assert [r.target for r in elsewhere.seen] == [
        "/ls/data/upload/1/cat.png",
        "/ls/storage-data/uploaded/?filepath=upload/1/cat.png",
    ]


def test_a_redirect_within_label_studio_keeps_the_key(label_studio: Host) -> None:
    assert fetch_one(config_for(label_studio), "/data/upload/1/moved.png") == IMAGE
    assert {request.authorization for request in label_studio.seen} == {f"Token {LEGACY_KEY}"}


def test_a_wrong_key_is_reported_without_echoing_it(label_studio: Host) -> None:
    config = config_for(label_studio, label_studio_api_key="wrong-key-123")
    with pytest.raises(ImageFetchFailedError, match="refused camserve's API key") as caught:
        fetch_one(config, "/data/upload/1/cat.png")
    assert caught.value.upstream_status == 401
    assert "wrong-key-123" not in str(caught.value)


def test_a_personal_access_token_is_exchanged_once(label_studio: Host) -> None:
    config = config_for(label_studio, label_studio_api_key=REFRESH_TOKEN)
    images = fetch(config, "/data/upload/1/cat.png", "/data/upload/1/cat.png")
    assert images == [IMAGE, IMAGE]
    assert [(r.method, r.target, r.authorization) for r in label_studio.seen] == [
        ("POST", "/api/token/refresh/", None),
        ("GET", "/data/upload/1/cat.png", f"Bearer {ACCESS_TOKEN}"),
        ("GET", "/data/upload/1/cat.png", f"Bearer {ACCESS_TOKEN}"),
    ]


def test_an_access_token_near_its_expiry_is_exchanged_again(label_studio: Host) -> None:
    """An access token that expires within the safety margin is never reused."""
    label_studio.access_token = make_jwt({"token_type": "access", "exp": time.time() + 5})
    config = config_for(label_studio, label_studio_api_key=REFRESH_TOKEN)
    assert fetch(config, "/data/upload/1/cat.png", "/data/upload/1/cat.png") == [IMAGE, IMAGE]
    assert label_studio.paths_seen() == ["/api/token/refresh/", "/data/upload/1/cat.png"] * 2


def test_a_rejected_access_token_is_exchanged_again_next_time(label_studio: Host) -> None:
    """Label Studio stops accepting the cached access token: that fetch fails, the next one
    exchanges the personal access token again."""
    config = config_for(label_studio, label_studio_api_key=REFRESH_TOKEN)
    rotated = make_jwt({"token_type": "access", "exp": time.time() + 600, "jti": "rotated"})

    async def fetch_around_a_rotation() -> tuple[bytes, Exception, bytes]:
        async with TaskImageFetcher(config) as fetcher:
            before = await fetcher.fetch("/data/upload/1/cat.png")
            label_studio.access_token = rotated
            with pytest.raises(ImageFetchFailedError) as caught:
                await fetcher.fetch("/data/upload/1/cat.png")
            return before, caught.value, await fetcher.fetch("/data/upload/1/cat.png")

    before, error, after = asyncio.run(fetch_around_a_rotation())
    assert (before, after) == (IMAGE, IMAGE)
    assert "refused camserve's API key" in str(error)
    assert [r.authorization for r in label_studio.seen if r.method == "GET"] == [
        f"Bearer {ACCESS_TOKEN}",
        f"Bearer {ACCESS_TOKEN}",
        f"Bearer {rotated}",
    ]
    assert label_studio.paths_seen().count("/api/token/refresh/") == 2


def test_a_refused_personal_access_token_is_reported(label_studio: Host) -> None:
    revoked = make_jwt({"token_type": "refresh", "exp": time.time() + 60, "user_id": 2})
    config = config_for(label_studio, label_studio_api_key=revoked)
    with pytest.raises(ImageFetchFailedError, match="refused to exchange") as caught:
        fetch_one(config, "/data/upload/1/cat.png")
    assert caught.value.upstream_status == 401
    assert revoked not in str(caught.value)
    assert label_studio.paths_seen() == ["/api/token/refresh/"]


def test_an_access_token_key_is_sent_as_bearer_without_exchange(label_studio: Host) -> None:
    config = config_for(label_studio, label_studio_api_key=ACCESS_TOKEN)
    assert fetch_one(config, "/data/upload/1/cat.png") == IMAGE
    assert [(r.target, r.authorization) for r in label_studio.seen] == [
        ("/data/upload/1/cat.png", f"Bearer {ACCESS_TOKEN}")
    ]


def test_an_absolute_url_on_label_studio_gets_the_key(label_studio: Host) -> None:
    assert fetch_one(config_for(label_studio), label_studio.url("/data/upload/1/cat.png")) == IMAGE
    assert label_studio.seen[0].authorization == f"Token {LEGACY_KEY}"


def test_the_key_does_not_follow_a_redirect_off_label_studio(
    label_studio: Host, elsewhere: Host
) -> None:
    assert (
        fetch_one(config_for(label_studio, allow=[elsewhere]), "/data/upload/1/elsewhere.png")
        == IMAGE
    )
    assert [(r.target, r.authorization) for r in elsewhere.seen] == [("/image.png", None)]


def test_a_third_party_redirect_to_label_studio_gets_no_key(
    label_studio: Host, elsewhere: Host
) -> None:
    with pytest.raises(ImageFetchFailedError, match="answered HTTP 401") as caught:
        fetch_one(config_for(label_studio, allow=[elsewhere]), elsewhere.url("/to-label-studio"))
    assert caught.value.upstream_status == 401
    assert [request.authorization for request in label_studio.seen] == [None]


def test_an_upload_missing_from_disk_comes_through_the_storage_proxy(label_studio: Host) -> None:
    assert fetch_one(config_for(label_studio), "/data/upload/1/cloud.png") == CLOUD_IMAGE
    assert [r.target for r in label_studio.seen] == [
        "/data/upload/1/cloud.png",
        "/storage-data/uploaded/?filepath=upload/1/cloud.png",
    ]


def test_a_cloud_uri_is_fetched_through_the_presign_endpoint(
    label_studio: Host, elsewhere: Host
) -> None:
    assert (
        fetch_one(config_for(label_studio, allow=[elsewhere]), "s3://bucket/cat.png", task_id=7)
        == IMAGE
    )
    fileuri = base64.urlsafe_b64encode(b"s3://bucket/cat.png").decode()
    assert [(r.target, r.authorization) for r in label_studio.seen] == [
        (f"/tasks/7/presign/?fileuri={fileuri}", f"Token {LEGACY_KEY}")
    ]
    assert [(r.target, r.authorization) for r in elsewhere.seen] == [
        ("/signed/cat.png?X-Amz-Signature=s3cr3t", None)
    ]


@pytest.mark.parametrize("uri", ["s3://bucket/cat.png", "gs://b/c.png", "azure-blob://c/x.png"])
def test_a_cloud_uri_without_a_task_id_is_refused(label_studio: Host, uri: str) -> None:
    with pytest.raises(ImageReferenceRefusedError, match="needs the task's id"):
        fetch_one(config_for(label_studio), uri)
    assert label_studio.seen == []


@pytest.mark.parametrize(
    ("settings", "missing"),
    [
        (
            {},
            "no Label Studio URL is configured: set LABEL_STUDIO_URL (Label Studio's address as "
            "camserve reaches it) and LABEL_STUDIO_API_KEY",
        ),
        (
            {"label_studio_url": "http://ls:8080"},
            "no Label Studio API key is configured: set LABEL_STUDIO_API_KEY (a personal access "
            "token)",
        ),
    ],
)
@pytest.mark.parametrize("reference", ["/data/upload/1/cat.png", "s3://bucket/cat.png"])
def test_label_studio_references_need_its_url_and_key(
    settings: dict[str, str], missing: str, reference: str
) -> None:
    """Issue #52: the message names the settings to set."""
    with pytest.raises(ImageReferenceRefusedError) as refused:
        fetch_one(config_for(**settings), reference, task_id=7)
    assert str(refused.value).endswith(f"lives on Label Studio, but {missing}")


@pytest.mark.parametrize(
    "reference",
    [
        "/data/upload/../../api/users",
        "/data/upload/%2e%2e/%2E%2E/api/users",
        "/data/upload/..%2f..%2fapi/users",
        "/data/upload/..\\..\\api\\users",
        "/data/./upload/1/cat.png",
    ],
)
def test_traversal_in_a_label_studio_path_is_refused(label_studio: Host, reference: str) -> None:
    with pytest.raises(ImageReferenceRefusedError, match=r"contains '\.\.', '\.' or a backslash"):
        fetch_one(config_for(label_studio), reference)
    assert label_studio.seen == []


@pytest.mark.parametrize("reference", ["/api/users", "/static/cat.png", "/tasks/7/annotations"])
def test_other_label_studio_paths_are_refused(label_studio: Host, reference: str) -> None:
    with pytest.raises(ImageReferenceRefusedError, match="neither a Label Studio data path"):
        fetch_one(config_for(label_studio), reference)
    assert label_studio.seen == []


# Local files under the document root


@pytest.mark.parametrize(
    "reference",
    [
        local_reference("images/cat.png"),
        local_reference("images%2Fcat.png"),
        "/data/local-files?d=images/cat.png",
        "/data/local-files/?d=other.png&d=images/cat.png",
    ],
)
def test_a_local_file_is_read(local_root: Path, reference: str) -> None:
    assert fetch_one(config_for(local_files_root=local_root), reference) == LOCAL_IMAGE


@pytest.mark.parametrize(
    ("relative", "why"),
    [
        ("../secret.png", "contains '..'"),
        ("images/../../secret.png", "contains '..'"),
        ("%2e%2e%2fsecret.png", "contains '..'"),
        ("%2E%2E/secret.png", "contains '..'"),
        ("images/%2e%2e/%2e%2e/secret.png", "contains '..'"),
        ("..\\secret.png", "backslash"),
        ("images%5c..%5c..%5csecret.png", "backslash"),
        ("/etc/passwd", "is absolute"),
        ("%2Fetc%2Fpasswd", "is absolute"),
        ("C:/secret.png", "is absolute"),
        ("images/cat.png%00.txt", "NUL"),
        ("", "has no path"),
    ],
)
def test_a_local_path_out_of_the_root_is_refused(local_root: Path, relative: str, why: str) -> None:
    with pytest.raises(ImageReferenceRefusedError, match=why) as caught:
        fetch_one(config_for(local_files_root=local_root), local_reference(relative))
    assert caught.value.code == "image_reference_refused"
    assert str(local_root) not in str(caught.value)


def test_an_absolute_path_to_a_file_outside_is_refused(local_root: Path) -> None:
    outside = local_root.parent / "secret.png"
    with pytest.raises(ImageReferenceRefusedError, match="is absolute"):
        fetch_one(config_for(local_files_root=local_root), local_reference(str(outside)))


def test_a_local_reference_without_d_is_refused(local_root: Path) -> None:
    with pytest.raises(ImageReferenceRefusedError, match=r"has no path \(\?d=\)"):
        fetch_one(config_for(local_files_root=local_root), "/data/local-files/?file=cat.png")


@pytest.mark.parametrize("link", ["escape.png", "linked-dir/secret.png"])
def test_a_symlink_escaping_the_root_is_refused(local_root: Path, link: str) -> None:
    (local_root / "escape.png").symlink_to(local_root.parent / "secret.png")
    (local_root / "linked-dir").symlink_to(local_root.parent, target_is_directory=True)
    with pytest.raises(ImageReferenceRefusedError, match="leads outside the local files root"):
        fetch_one(config_for(local_files_root=local_root), local_reference(link))


def test_a_symlink_within_the_root_is_followed(local_root: Path) -> None:
    (local_root / "alias.png").symlink_to(local_root / "images" / "cat.png")
    config = config_for(local_files_root=local_root)
    assert fetch_one(config, local_reference("alias.png")) == LOCAL_IMAGE


def test_a_root_reached_through_a_symlink_still_works(local_root: Path) -> None:
    alias = local_root.parent / "root-alias"
    alias.symlink_to(local_root, target_is_directory=True)
    config = config_for(local_files_root=alias)
    assert fetch_one(config, local_reference("images/cat.png")) == LOCAL_IMAGE


@pytest.mark.parametrize("relative", ["images/dog.png", "images", "."])
def test_a_missing_file_or_a_directory_is_refused(local_root: Path, relative: str) -> None:
    with pytest.raises(ImageReferenceRefusedError, match=f"no file '{relative}'"):
        fetch_one(config_for(local_files_root=local_root), local_reference(relative))


def test_an_oversize_local_file_is_refused_and_one_at_the_limit_read(local_root: Path) -> None:
    (local_root / "big.png").write_bytes(b"x" * (LIMIT + 1))
    (local_root / "fits.png").write_bytes(b"y" * LIMIT)
    config = config_for(local_files_root=local_root)
    with pytest.raises(PayloadTooLargeError, match=f"larger than the {LIMIT}-byte limit"):
        fetch_one(config, local_reference("big.png"))
    assert fetch_one(config, local_reference("fits.png")) == b"y" * LIMIT


def test_local_files_are_refused_without_a_root() -> None:
    """Issue #52: the message names the setting to set."""
    with pytest.raises(ImageReferenceRefusedError) as refused:
        fetch_one(config_for(), local_reference("images/cat.png"))
    assert str(refused.value) == (
        "local files (/data/local-files/) are refused: no local files root is configured; set "
        "LOCAL_FILES_DOCUMENT_ROOT to the folder Label Studio's "
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT points at"
    )


# Data URIs and everything else


def test_a_data_uri_is_decoded() -> None:
    reference = "data:image/png;base64," + base64.b64encode(IMAGE).decode()
    assert fetch_one(config_for(), reference) == IMAGE


def test_an_oversize_data_uri_is_refused() -> None:
    reference = "data:image/png;base64," + base64.b64encode(b"x" * (LIMIT + 1)).decode()
    with pytest.raises(PayloadTooLargeError, match=f"more than the {LIMIT}-byte limit"):
        fetch_one(config_for(), reference)


@pytest.mark.parametrize(
    ("reference", "why"),
    [
        ("data:text/html;base64,PGgxPg==", "only base64 data URIs of an image"),
        ("data:image/svg+xml,<svg/>", "only base64 data URIs of an image"),
        ("data:image/png;base64,not base64!", "not valid base64"),
    ],
)
def test_other_data_uris_are_refused(reference: str, why: str) -> None:
    with pytest.raises(ImageReferenceRefusedError, match=why):
        fetch_one(config_for(), reference)


@pytest.mark.parametrize(
    ("reference", "why"),
    [
        ("file:///etc/passwd", "file:// image references are refused"),
        ("ftp://example.com/cat.png", "ftp:// image references are refused"),
        ("javascript:alert(1)", "javascript:// image references are refused"),
        ("C:\\images\\cat.png", "c:// image references are refused"),
        ("images/cat.png", "bare file paths are never read"),
        ("//example.com/cat.png", "protocol-relative URLs need an http"),
        ("   ", "empty image reference"),
    ],
)
def test_other_references_are_refused(local_root: Path, reference: str, why: str) -> None:
    with pytest.raises(ImageReferenceRefusedError, match=why):
        fetch_one(config_for(local_files_root=local_root), reference)


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"local_files_root": Path("/")}, "cannot be '/'"),
        ({"label_studio_url": "localhost:8080"}, "http:// or https:// URL"),
        ({"label_studio_api_key": "key\r\nX-Injected: 1"}, "printable ASCII without spaces"),
        ({"label_studio_api_key": "Token abc"}, "printable ASCII without spaces"),
        ({"max_bytes": 0}, "max_bytes must be positive"),
        ({"timeout_s": 0.0}, "timeout_s must be positive"),
    ],
)
def test_an_unsafe_configuration_is_rejected(settings: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        ImageSourceConfig(**settings)
