"""The output folder of a dataset run: its Parquet files, what they already hold (so a rerun
skips those images), and files a killed run left half-written.

An image's rows are written together, in one file, by one write (``write_rows``, one file per
batch an actor explained); a file that cannot be read is one that a run was stopped in the
middle of writing. It is renamed to ``.<name>.incomplete``
(hidden from readers of the folder) and its images are explained again.

Files an earlier camserve wrote (ranks from 0, no ``ROWS_VERSION_KEY`` in their metadata;
``camserve.dataset.rows``) are read with their ranks moved to count from 1, so the exports read old
outputs as new ones; a run is refused from adding rows to such an output, which would then hold
both conventions.
"""

from __future__ import annotations

import posixpath
import uuid
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs

from camserve.dataset.inputs import filesystem_of
from camserve.dataset.rows import ROW_SCHEMA, ROWS_VERSION_KEY
from camserve.engine.errors import CamserveError

__all__ = [
    "EarlierRowsError",
    "WrittenImages",
    "parquet_files",
    "read_rows",
    "write_rows",
    "written_images",
]


class EarlierRowsError(CamserveError, ValueError):
    """The output holds rows of an earlier camserve, whose ranks counted from 0."""

    code = "dataset_output"


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
        if _earlier(ids.schema):
            raise EarlierRowsError(
                f"{output} holds rows written by an earlier camserve ({path}), whose ranks count "
                "from 0; rows now count them from 1, as /v1/explain does. Write this run to a "
                "new folder (dataset-labelstudio, dataset-cvat and dataset-fiftyone read the "
                "earlier rows with their ranks from 1)"
            )
        written.ids.update(ids.column("image_id").to_pylist())
    return written


def read_rows(output: str, columns: list[str] | None = None) -> pa.Table:
    """Every row of the output (or only ``columns``), one table."""
    filesystem, _ = filesystem_of(output)
    tables = [
        _ranked_from_one(pq.read_table(p, columns=columns, filesystem=filesystem))
        for p in parquet_files(output)
    ]
    if not tables:
        schema = (
            ROW_SCHEMA if columns is None else pa.schema([ROW_SCHEMA.field(c) for c in columns])
        )
        return schema.empty_table()
    return pa.concat_tables(tables)


def _earlier(schema: pa.Schema) -> bool:
    return ROWS_VERSION_KEY not in (schema.metadata or {})


def _ranked_from_one(table: pa.Table) -> pa.Table:
    """``table`` with ranks from 1: an earlier camserve's (from 0) moved up by one."""
    if not _earlier(table.schema):
        return table
    if "rank" in table.column_names:
        ranks = pc.add(table.column("rank"), 1).cast(pa.int32())
        table = table.set_column(table.column_names.index("rank"), "rank", ranks)
    return table.replace_schema_metadata({**(table.schema.metadata or {}), **ROW_SCHEMA.metadata})


def write_rows(output: str, rows: pa.Table) -> str:
    """``rows`` as a new Parquet file in the output folder (which exists), under a name no
    other writer takes; its path."""
    filesystem, base = filesystem_of(output)
    path = f"{base.rstrip('/')}/{uuid.uuid4().hex}.parquet"
    pq.write_table(rows, path, filesystem=filesystem)
    return path
