"""Image paths as Label Studio task references (``camserve.dataset.local_files``): with the
local-files prefix, relative to the local files root and URL-quoted, as Label Studio and
camserve's ``/labelstudio/predict`` read them; outside the root, a clear refusal."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from pydantic import AliasChoices

from camserve.config import Settings
from camserve.dataset.local_files import (
    LOCAL_FILES_PREFIX,
    LOCAL_FILES_ROOT_SETTINGS,
    TaskImagePaths,
    is_local_files_prefix,
    task_image_paths,
)
from camserve.labeling.bounded_reads import inside_root


def test_paths_under_the_root_are_written_relative_to_it_and_quoted(tmp_path: Path) -> None:
    paths = TaskImagePaths(LOCAL_FILES_PREFIX, tmp_path)

    assert (
        paths.reference(str(tmp_path / "shapes" / "a.png")) == "/data/local-files/?d=shapes/a.png"
    )
    assert (
        paths.reference(str(tmp_path / "two words" / "b+c%.png"))
        == "/data/local-files/?d=two%20words/b%2Bc%25.png"
    )


def test_a_reference_leads_camserve_back_to_the_same_file(tmp_path: Path) -> None:
    image = tmp_path / "two words" / "b+c&d=e.png"
    image.parent.mkdir()
    image.write_bytes(b"png")
    reference = TaskImagePaths(LOCAL_FILES_PREFIX, tmp_path).reference(str(image))

    (relative,) = parse_qs(urlsplit(reference).query)["d"]  # as /labelstudio/predict reads it
    assert inside_root(tmp_path.resolve(), relative) == image.resolve()


def test_an_image_outside_the_root_is_refused_naming_both(tmp_path: Path) -> None:
    root, image = tmp_path / "files", tmp_path / "elsewhere" / "a.png"
    paths = TaskImagePaths(LOCAL_FILES_PREFIX, root)

    with pytest.raises(ValueError, match="outside the local files root") as refused:
        paths.reference(str(image))
    assert str(image) in str(refused.value)
    assert str(root.resolve()) in str(refused.value)
    assert "--local-files-root" in str(refused.value)


def test_a_uri_is_not_a_local_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"the image s3://bucket/a\.png is not a local file"):
        TaskImagePaths(LOCAL_FILES_PREFIX, tmp_path).reference("s3://bucket/a.png")


def test_a_symlink_out_of_the_root_is_refused_as_camserve_refuses_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "linked").symlink_to(outside)

    with pytest.raises(ValueError, match="outside the local files root"):
        TaskImagePaths(LOCAL_FILES_PREFIX, tmp_path / "files").reference(
            str(tmp_path / "files" / "linked" / "a.png")
        )


def test_the_local_files_prefix_needs_a_root_and_says_what_to_pass() -> None:
    message = re.escape(
        "--image-prefix '/data/local-files/?d=' names files relative to Label Studio's local "
        "files root (its LOCAL_FILES_DOCUMENT_ROOT): pass --local-files-root DIR with that "
        "folder, or set LOCAL_FILES_DOCUMENT_ROOT"
    )
    with pytest.raises(ValueError, match=message):
        TaskImagePaths(LOCAL_FILES_PREFIX)


def test_a_root_with_another_prefix_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="applies only to --image-prefix '/data/local-files/"):
        TaskImagePaths("https://images.example/", tmp_path)


def test_other_prefixes_go_before_the_path_as_it_is() -> None:
    assert TaskImagePaths().reference("/photos/a b.png") == "/photos/a b.png"
    web = TaskImagePaths("https://images.example")
    assert web.reference("/photos/a.png") == "https://images.example/photos/a.png"


def test_local_files_prefixes_on_any_host() -> None:
    assert is_local_files_prefix("/data/local-files/?d=")
    assert is_local_files_prefix("http://localhost:8080/data/local-files/?d=")
    assert is_local_files_prefix("/data/local-files?d=")
    assert not is_local_files_prefix("/data/upload/")
    assert not is_local_files_prefix("")


def test_the_root_comes_from_the_option_then_the_settings(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    environ = {"LOCAL_FILES_DOCUMENT_ROOT": str(second)}

    assert task_image_paths(LOCAL_FILES_PREFIX, first, environ).root == first.resolve()
    assert task_image_paths(LOCAL_FILES_PREFIX, None, environ).root == second.resolve()
    camserve_first = {**environ, "CAMSERVE_LOCAL_FILES_DOCUMENT_ROOT": str(first)}
    assert task_image_paths(LOCAL_FILES_PREFIX, None, camserve_first).root == first.resolve()
    implied = task_image_paths("", first, {})
    assert (implied.prefix, implied.root) == (LOCAL_FILES_PREFIX, first.resolve())
    assert task_image_paths("https://images.example/", None, environ).root is None


def test_a_relative_root_is_taken_from_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    paths = task_image_paths(LOCAL_FILES_PREFIX, Path("files"), {})
    assert paths.reference(str(tmp_path / "files" / "a.png")) == "/data/local-files/?d=a.png"


def test_the_settings_are_the_servers() -> None:
    alias = Settings.model_fields["local_files_document_root"].validation_alias
    assert isinstance(alias, AliasChoices)
    assert tuple(alias.choices) == LOCAL_FILES_ROOT_SETTINGS
