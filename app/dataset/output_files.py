"""The output folder of a dataset run: its Parquet files, what they already hold (so a rerun
skips those images), and files a killed run left half-written.

An image's rows are written together, in one file, by one write (``write_rows``, one file per
batch an actor explained); a file that cannot be read is one that a run was stopped in the
middle of writing. It is renamed to ``.<name>.incomplete``
(hidden from readers of the folder) and its images are explained again.
"""

from __future__ import annotations

import posixpath
import uuid
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from app.dataset.inputs import filesystem_of
from app.dataset.rows import ROW_SCHEMA

__all__ = ["WrittenImages", "parquet_files", "read_rows", "write_rows", "written_images"]


@dataclass
class WrittenImages:
    ids: set[str] = field(default_factory=set)
    set_aside: list[str] = field(default_factory=list)
    """Half-written files renamed out of the way, by their new paths."""


def parquet_files(output: str) -> list[str]:
    """The readable part of the output: every ``*.parquet`` file, hidden ones left out."""
    filesystem, base = filesystem_of(output)
    if filesystem.get_file_info(base).type != fs.FileType.Directory:
        return []
    selector = fs.FileSelector(base, recursive=True)
    return sorted(
        info.path
        for info in filesystem.get_file_info(selector)
        if info.type == fs.FileType.File
        and info.path.endswith(".parquet")
        and not any(
            part.startswith((".", "_")) for part in posixpath.relpath(info.path, base).split("/")
        )
    )


def written_images(output: str) -> WrittenImages:
    """The image ids the output already holds; half-written files are set aside."""
    filesystem, _ = filesystem_of(output)
    written = WrittenImages()
    for path in parquet_files(output):
        try:
            ids = pq.read_table(path, columns=["image_id"], filesystem=filesystem)
        except (pa.ArrowInvalid, OSError):
            folder, name = posixpath.split(path)
            aside = posixpath.join(folder, f".{name}.incomplete")
            filesystem.move(path, aside)
            written.set_aside.append(aside)
            continue
        written.ids.update(ids.column("image_id").to_pylist())
    return written


def read_rows(output: str, columns: list[str] | None = None) -> pa.Table:
    """Every row of the output (or only ``columns``), one table."""
    filesystem, _ = filesystem_of(output)
    tables = [
        pq.read_table(p, columns=columns, filesystem=filesystem) for p in parquet_files(output)
    ]
    if not tables:
        schema = (
            ROW_SCHEMA if columns is None else pa.schema([ROW_SCHEMA.field(c) for c in columns])
        )
        return schema.empty_table()
    return pa.concat_tables(tables)


def write_rows(output: str, rows: pa.Table) -> str:
    """``rows`` as a new Parquet file in the output folder (which exists), under a name no
    other writer takes; its path."""
    filesystem, base = filesystem_of(output)
    path = f"{base.rstrip('/')}/{uuid.uuid4().hex}.parquet"
    pq.write_table(rows, path, filesystem=filesystem)
    return path
