"""Where a dataset's images are: a folder, a glob, or a manifest (CSV, Parquet or JSONL) of
image paths, on the local disk or on any filesystem pyarrow opens (``s3://``, ``gs://``,
``hdfs://``, ...).

Every image gets an id that names it in the output and in a resumed run: its path relative to
the folder (or to the glob's fixed part), or for a manifest its ``id`` column where there is
one, else the path as the manifest writes it. Relative paths in a manifest are relative to the
manifest's own folder.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from pyarrow import fs

from camserve.engine.errors import CamserveError
from camserve.engine.images.image_files import IMAGE_SUFFIXES

__all__ = [
    "MANIFEST_SUFFIXES",
    "DatasetInputError",
    "ImageRef",
    "filesystem_of",
    "list_images",
    "read_file",
]

MANIFEST_SUFFIXES = (".csv", ".parquet", ".jsonl", ".ndjson")
PATH_COLUMNS = ("path", "image", "filepath", "file", "image_path")
ID_COLUMNS = ("id", "image_id")
WILDCARDS = re.compile(r"[*?\[]")


class DatasetInputError(CamserveError):
    """The dataset's input cannot be listed: missing, empty, or a manifest without paths."""

    code = "dataset_input"


@dataclass(frozen=True)
class ImageRef:
    image_id: str
    path: str
    """A local absolute path, or a URI with its scheme (``s3://bucket/key``)."""


def list_images(source: str) -> list[ImageRef]:
    """The images ``source`` names, in a stable order, each with a unique id."""
    uri = _absolute(source)
    if WILDCARDS.search(uri):
        images = _glob(uri)
    else:
        filesystem, path = filesystem_of(uri)
        info = filesystem.get_file_info(path)
        if info.type == fs.FileType.Directory:
            images = _folder(uri)
        elif info.type == fs.FileType.File and _suffix(path) in MANIFEST_SUFFIXES:
            images = _manifest(uri)
        elif info.type == fs.FileType.File:
            raise DatasetInputError(
                f"{source} is neither a folder nor a manifest ({', '.join(MANIFEST_SUFFIXES)})"
            )
        else:
            raise DatasetInputError(f"{source}: no such file or folder")
    _check_unique(images)
    return images


@lru_cache(maxsize=16)
def _filesystem(scheme_and_host: str) -> fs.FileSystem:
    filesystem, _ = fs.FileSystem.from_uri(scheme_and_host or "/")
    return filesystem


def filesystem_of(uri: str) -> tuple[fs.FileSystem, str]:
    """pyarrow's filesystem for ``uri`` (one per scheme and host, reused) and the path in it."""
    if "://" not in uri:
        return _filesystem(""), uri
    filesystem, path = fs.FileSystem.from_uri(uri)
    return filesystem, path


def read_file(uri: str) -> bytes:
    """The whole file at ``uri``."""
    filesystem, path = filesystem_of(uri)
    with filesystem.open_input_file(path) as handle:
        data: bytes = handle.readall()
    return data


def _absolute(source: str) -> str:
    if "://" in source:
        return source.rstrip("/")
    return str(Path(source).expanduser().absolute())


def _suffix(path: str) -> str:
    return posixpath.splitext(path)[1].lower()


def _join(base_uri: str, relative: str) -> str:
    return f"{base_uri.rstrip('/')}/{relative}"


def _files_under(base_uri: str) -> list[str]:
    """Paths of every file under ``base_uri``, relative to it, sorted."""
    filesystem, base = filesystem_of(base_uri)
    selector = fs.FileSelector(base, recursive=True, allow_not_found=True)
    found = [
        posixpath.relpath(info.path, base)
        for info in filesystem.get_file_info(selector)
        if info.type == fs.FileType.File
    ]
    return sorted(found)


def _folder(uri: str) -> list[ImageRef]:
    return [
        ImageRef(relative, _join(uri, relative))
        for relative in _files_under(uri)
        if _suffix(relative) in IMAGE_SUFFIXES and not _hidden(relative)
    ]


def _glob(uri: str) -> list[ImageRef]:
    """A glob's matches; ``*`` and ``?`` also match across folders (``images/*.png`` takes
    ``images/a/b.png`` too), and only image files are taken, hidden ones left out."""
    match = WILDCARDS.search(uri)
    assert match is not None
    base = uri[: match.start()].rsplit("/", 1)[0]
    pattern = uri[len(base) + 1 :]
    return [
        ImageRef(relative, _join(base, relative))
        for relative in _files_under(base)
        if fnmatch.fnmatchcase(relative, pattern)
        and _suffix(relative) in IMAGE_SUFFIXES
        and not _hidden(relative)
    ]


def _hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/"))


def _manifest(uri: str) -> list[ImageRef]:
    table = _read_manifest(uri)
    path_column = _column(table, PATH_COLUMNS, uri, required=True)
    id_column = _column(table, ID_COLUMNS, uri, required=False)
    paths = [str(value) for value in table.column(path_column).to_pylist() if value is not None]
    if len(paths) != table.num_rows:
        raise DatasetInputError(f"{uri}: the {path_column!r} column has empty rows")
    ids = (
        [str(value) for value in table.column(id_column).to_pylist()]
        if id_column is not None
        else paths
    )
    folder = uri.rsplit("/", 1)[0]
    return [
        ImageRef(image_id, path if _is_absolute(path) else _join(folder, path))
        for image_id, path in zip(ids, paths, strict=True)
    ]


def _is_absolute(path: str) -> bool:
    return "://" in path or path.startswith("/")


def _read_manifest(uri: str) -> pa.Table:
    filesystem, path = filesystem_of(uri)
    suffix = _suffix(path)
    try:
        if suffix == ".parquet":
            return pq.read_table(path, filesystem=filesystem)
        with filesystem.open_input_stream(path) as stream:
            if suffix == ".csv":
                return pa_csv.read_csv(stream)
            return pa_json.read_json(stream)
    except (pa.ArrowInvalid, OSError) as error:
        raise DatasetInputError(f"{uri}: not a readable manifest ({error})") from error


def _column(table: pa.Table, names: tuple[str, ...], uri: str, *, required: bool) -> str | None:
    for name in names:
        if name in table.column_names:
            return name
    if required:
        raise DatasetInputError(
            f"{uri}: a manifest needs a column of image paths named one of {', '.join(names)}; "
            f"it has {', '.join(table.column_names) or 'none'}"
        )
    return None


def _check_unique(images: list[ImageRef]) -> None:
    if not images:
        raise DatasetInputError("no images found")
    counts = Counter(ref.image_id for ref in images)
    repeated = sorted(image_id for image_id, count in counts.items() if count > 1)
    if repeated:
        raise DatasetInputError(f"image ids must be unique; repeated: {', '.join(repeated[:5])}")
