"""The page's routes, in-process: what is served, with which headers, and that everything the
page loads is local, installed with the package, and free of the API key."""

from __future__ import annotations

import fnmatch
import io
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from fastapi.testclient import TestClient
from PIL import Image

from camserve.engine.images.colormaps import COLORMAPS, colormap_table
from camserve.web import routes
from camserve.web.routes import (
    COLORMAPS_PATH,
    SAMPLE_PREFIX,
    SAMPLES_DIR,
    SAMPLES_PATH,
    STATIC_DIR,
    asset_paths,
)
from tests.api.helpers import assert_error, make_settings, serving
from tests.integration.live import MetricsSnapshot

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "routes-secret"
LOCAL_REFERENCE = re.compile(r"""(?:src|href)="([^"]+)"|from '(\./[^']+)'""")


@pytest.fixture(scope="module")
def client(models_dir: Path) -> Iterator[TestClient]:
    with serving(make_settings(models_dir, api_key=API_KEY)) as client:
        yield client


def requests_total(client: TestClient, route: str, status: str) -> float:
    metrics = MetricsSnapshot.parse(client.get("/metrics").text)
    return metrics.value("camserve_requests_total", route=route, status=status)


def references(path: Path) -> list[str]:
    """The URLs an HTML file's src/href attributes or a JS module's imports name."""
    return [a or b for a, b in LOCAL_REFERENCE.findall(path.read_text())]


def test_the_page_is_served_at_the_root_without_the_key(client: TestClient) -> None:
    response = client.get("/")

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.text == (STATIC_DIR / "index.html").read_text()
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    assert_error(client.get("/v1/models"), 401, "unauthorized")


@pytest.mark.parametrize(
    ("suffix", "media_type"),
    [(".js", "text/javascript; charset=utf-8"), (".css", "text/css; charset=utf-8")],
)
def test_every_asset_is_served_with_its_media_type(
    client: TestClient, suffix: str, media_type: str
) -> None:
    assets = {url: path for url, path in asset_paths().items() if path.suffix == suffix}
    assert assets, f"no {suffix} file in {STATIC_DIR}"
    for url, path in assets.items():
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["content-type"] == media_type
        assert response.content == path.read_bytes()
        assert response.headers["cache-control"] == "no-cache"
        assert "etag" in response.headers


@pytest.mark.parametrize("path", ["/", "/static/app.js"])
def test_an_unchanged_file_is_not_sent_again(client: TestClient, path: str) -> None:
    tag = client.get(path).headers["etag"]

    for if_none_match in (tag, f'"other", W/{tag}', "*"):
        again = client.get(path, headers={"If-None-Match": if_none_match})
        assert again.status_code == 304, if_none_match
        assert again.content == b""
        assert again.headers["etag"] == tag
    assert client.get(path, headers={"If-None-Match": '"other"'}).status_code == 200


def test_everything_the_page_loads_is_served_locally(client: TestClient) -> None:
    files = [STATIC_DIR / "index.html", *STATIC_DIR.glob("*.js")]
    wanted = {
        url if url.startswith(("/", "data:")) else "/static/" + url.removeprefix("./")
        for path in files
        for url in references(path)
    }
    assert "/static/app.js" in wanted
    assert "/static/pixels.js" in wanted
    for url in sorted(wanted - {"data:,"}):
        assert client.get(url).status_code == 200, url
    for path in STATIC_DIR.iterdir():
        if path.is_file():
            assert not re.search(r"https?://|//cdn|@import", path.read_text()), path.name


def test_the_colormaps_are_the_servers_tables(client: TestClient) -> None:
    tables = client.get(COLORMAPS_PATH).json()

    assert list(tables) == list(COLORMAPS)
    for name in COLORMAPS:
        assert tables[name] == colormap_table(name, torch.device("cpu")).tolist()


def test_the_samples_are_listed_and_served_as_images(client: TestClient) -> None:
    response = client.get(SAMPLES_PATH)

    assert response.status_code == 200
    listed = response.json()["samples"]
    shapes = sorted((SAMPLES_DIR / "shapes").glob("*.jpg"))
    assert [path.stem for path in shapes] == ["circle", "cross", "square", "star", "triangle"]
    shown = [sample for sample in listed if sample["group"] == "shapes"]
    assert [sample["url"] for sample in shown] == [
        f"{SAMPLE_PREFIX}shapes/{path.name}" for path in shapes
    ]
    groups = [(sample["group"], sample["folder"]) for sample in listed]
    assert list(dict.fromkeys(groups)) == [
        ("photos", "photos"),
        ("shapes", "shapes"),
        ("shapes detector", "shapes-detector"),
        ("shapes segmenter", "shapes-segmenter"),
    ], "a folder per model (shapes-detector), named as the model is"
    files = [path for path in SAMPLES_DIR.rglob("*") if path.suffix in {".jpg", ".png"}]
    assert len(listed) == len(files)
    for sample in listed:
        path = SAMPLES_DIR / sample["url"].removeprefix(SAMPLE_PREFIX)
        assert sample["name"] == path.stem.replace("-", " ").replace("_", " ")
        assert sample["bytes"] == path.stat().st_size < 50_000
        image = client.get(sample["url"])
        assert image.status_code == 200
        assert image.content == path.read_bytes()
        assert (
            image.headers["content-type"] == f"image/{'png' if path.suffix == '.png' else 'jpeg'}"
        )
        with Image.open(io.BytesIO(image.content)) as decoded:
            assert min(decoded.size) >= 64
    assert_error(client.get(SAMPLE_PREFIX + "nope.jpg"), 404, "not_found")
    assert_error(client.get(SAMPLE_PREFIX + "circle.jpg"), 404, "not_found")


def test_each_sub_folder_of_the_samples_is_a_group(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for relative in ("zebra.png", "still_life/b.jpg", "still_life/a.jpg", "animals/owl.webp"):
        (tmp_path / relative).parent.mkdir(exist_ok=True)
        (tmp_path / relative).write_bytes(b"image")
    (tmp_path / "animals" / "notes.txt").write_text("not an image")
    (tmp_path / "animals" / "deeper").mkdir()
    (tmp_path / "animals" / "deeper" / "hidden.jpg").write_bytes(b"image")
    monkeypatch.setattr(routes, "SAMPLES_DIR", tmp_path)

    listed = client.get(SAMPLES_PATH).json()["samples"]

    assert [
        (sample["group"], sample["folder"], sample["name"], sample["url"]) for sample in listed
    ] == [
        ("animals", "animals", "owl", f"{SAMPLE_PREFIX}animals/owl.webp"),
        ("still life", "still_life", "a", f"{SAMPLE_PREFIX}still_life/a.jpg"),
        ("still life", "still_life", "b", f"{SAMPLE_PREFIX}still_life/b.jpg"),
        (None, None, "zebra", f"{SAMPLE_PREFIX}zebra.png"),
    ]
    assert all(sample["bytes"] == len(b"image") for sample in listed)


def test_only_the_static_files_are_reachable(client: TestClient) -> None:
    unmatched = requests_total(client, "unmatched", "404")
    served = requests_total(client, "/static/style.css", "200")
    for url in ("/static/", "/static/../routes.py", "/static/index.html", "/static/nope.js"):
        assert_error(client.get(url), 404, "not_found")
    assert client.get("/static/style.css").status_code == 200

    assert requests_total(client, "unmatched", "404") == unmatched + 4
    assert requests_total(client, "/static/style.css", "200") == served + 1


def test_the_static_files_are_installed_with_the_package() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = setuptools["package-data"]["camserve.web"]
    for path in (path for path in STATIC_DIR.rglob("*") if path.is_file()):
        relative = path.relative_to(STATIC_DIR.parent).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative
