"""A lake table as it was at a source position, as DuckDB SQL over its Parquet files.

The lake side of a comparison is the mirror, the table users read (``cdc_core.lake.mirror_state``):
the mirror version before the first commit labelled above P, whatever wrote it, plus the
changelog's events after that version's mark up to P (for each key its latest event with
``_commit_pos <= P``, by ``_commit_pos`` then ``_seq``; with ``SourcePositions`` each key at
its partition's position; a delete drops the key, a truncate every row before it). When the
version holds everything (the pipeline wrote nothing above its mark yet, or it is stopped),
its files are read alone. A table without a key has no mirror: its changelog is replayed.

The files are read by DuckDB's own Parquet reader as views with the Delta tables' own
schemas (``register``): a file written before a column was added reads it as NULL (as
Spark's schema merge does), and each column has the type DuckDB gives the schema's Arrow
type, which the hash SQL was written for (``merkle.duckdb``). DuckDB reads only the columns
a query names, pushes key-range filters into the scan and decodes the other columns only
for the rows a filter keeps, so an incremental run's scattered leaves cost a fraction of a
scan (a ``pyarrow`` dataset hands DuckDB every row of every column: 10M rows, 2.2 s
against 0.6 s). A lake on an object store is the exception: DuckDB's own S3 reader is an
extension it cannot download here, so its files are handed to DuckDB as a ``pyarrow``
dataset on the store's filesystem (``cdc_core.lake_location``), with the same schema.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from cdc_core.lake.layout import LakeTable
from cdc_core.lake.mirror_state import KeyRange, MirrorRead, mirror_read
from cdc_core.lake_location import LakeLocation
from cdc_core.names import COMMIT_POS, COPY, OP, SEQ
from merkle.duckdb import quote
from validator.positions import SourcePositions

log = logging.getLogger(__name__)

# DuckDB's names of the Arrow types lake tables hold (tests check them against DuckDB's own).
TYPE_NAMES = {
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.string(): "VARCHAR",
    pa.binary(): "BLOB",
    pa.date32(): "DATE",
    pa.time64("us"): "TIME",
    pa.timestamp("us"): "TIMESTAMP",
    pa.timestamp("us", tz="UTC"): "TIMESTAMP WITH TIME ZONE",
    pa.duration("us"): "INTERVAL",
}


@dataclass(frozen=True, slots=True)
class LakeFiles:
    """What holds a lake table's state at a position (``MirrorRead``): the mirror version's
    files and the changelog's files with the events after it; ``schema`` is the mirror's,
    the columns users read; ``store`` the object store the files are on (None: local)."""

    read: MirrorRead
    store: LakeLocation | None = None

    @classmethod
    def of_version(cls, files: Sequence[str], schema: pa.Schema) -> LakeFiles:
        """A mirror version's ``files`` alone hold the state."""
        return cls(MirrorRead(0, tuple(files), schema, None, (), schema))

    @property
    def schema(self) -> pa.Schema:
        """The columns of the table users read."""
        return self.read.schema

    @property
    def exact(self) -> bool:
        """The mirror version alone holds the state: one plain scan of its files."""
        return self.read.exact

    def meeting(self, ranges: Sequence[KeyRange]) -> LakeFiles:
        """Only the mirror files that may hold a key in ``ranges`` (``MirrorRead.meeting``:
        the rows a run reads are filtered on the ranges anyway)."""
        return replace(self, read=self.read.meeting(ranges))


def duckdb_types(connection: Any, schema: pa.Schema) -> list[str]:
    """The type DuckDB gives each field of ``schema``: named here for the types lake tables
    hold (``TYPE_NAMES``), else found by DuckDB (``from_arrow``, which imports pandas on
    first use: 0.2 s, a tenth of an incremental run)."""
    named = [
        f"DECIMAL({t.precision},{t.scale})" if pa.types.is_decimal128(t) else TYPE_NAMES.get(t)
        for t in schema.types
    ]
    if all(named):
        return [str(t) for t in named]
    return [str(t) for t in connection.from_arrow(schema.empty_table()).types]


def _register_files(
    connection: Any,
    name: str,
    files: Sequence[str],
    schema: pa.Schema,
    store: LakeLocation | None = None,
) -> None:
    """The view ``name`` of ``files`` on ``connection``, with the columns of ``schema``."""
    present: set[str] = set()
    source = " WHERE FALSE"  # no files: an empty view
    if files and store is not None:
        present, source = (
            set(schema.names),
            f" FROM {_register_dataset(connection, name, files, schema, store)}",
        )
    elif files:
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        scan = f"read_parquet([{listed}], union_by_name = true, hive_partitioning = false)"
        described = connection.execute(f"DESCRIBE SELECT * FROM {scan}").fetchall()
        present, source = {row[0] for row in described}, f" FROM {scan}"
    columns = ", ".join(
        f"CAST({quote(c) if c in present else 'NULL'} AS {t}) AS {quote(c)}"
        for c, t in zip(schema.names, duckdb_types(connection, schema), strict=True)
    )
    connection.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {columns}{source}")


def _register_dataset(
    connection: Any, name: str, files: Sequence[str], schema: pa.Schema, store: LakeLocation
) -> str:
    """``files`` on an object store as a pyarrow dataset registered on ``connection``; its
    name there. Columns a file lacks read as NULL, as with ``union_by_name`` above."""
    import pyarrow.dataset as ds

    filesystem = store.filesystem()[0]
    paths = [store.file_of(uri)[0] for uri in files]
    dataset = ds.dataset(paths, schema=schema, format="parquet", filesystem=filesystem)
    connection.register(f"{name}_files", dataset)
    return f"{name}_files"


def register(connection: Any, name: str, lake: LakeFiles) -> None:
    """The views ``name`` (the mirror version's rows) and ``name``_events (the changelog's
    events after it) on ``connection``."""
    read = lake.read
    _register_files(connection, name, read.files, read.schema, lake.store)
    if not read.exact:
        _register_files(connection, f"{name}_events", read.after, read.after_schema, lake.store)


def lake_files(
    table: LakeTable, position: int | SourcePositions | None, key: str | None = None
) -> LakeFiles:
    """What holds ``table``'s state at ``position``: its mirror (``mirror_read``; with
    ``key``, each file's bounds of it, for ``LakeFiles.meeting``)."""
    if isinstance(position, SourcePositions):
        read = mirror_read(table, min(position.values), max(position.values), key)
    else:
        read = mirror_read(table, position, key=key)
    if read.exact:
        log.info("lake table %s: mirror version %d", table.table, read.version)
    else:
        log.info(
            "lake table %s: mirror version %d and %d changelog file(s) after it",
            table.table,
            read.version,
            len(read.after),
        )
    return LakeFiles(read, None if table.location.is_local else table.location)


def _cutoff(position: int | SourcePositions | None, key: str) -> str:
    """SQL true for the events at or below the position their key is compared at."""
    if position is None:
        return "TRUE"
    if isinstance(position, SourcePositions):
        return f"{quote(COMMIT_POS)} <= {position.cutoff_sql(quote(key))}"
    return f"{quote(COMMIT_POS)} <= {int(position)}"


def _after_mark(read: MirrorRead) -> str:
    """SQL true for the changelog events the mirror version does not hold."""
    if read.mark is None:
        return "TRUE"
    pos, seq = quote(COMMIT_POS), quote(SEQ)
    position, last = read.mark
    return f"({pos} > {position} OR ({pos} = {position} AND {seq} > {last}))"


def state_sql(
    relation: str,
    files: LakeFiles,
    columns: Sequence[str],
    key: Sequence[str],
    position: int | SourcePositions | None,
    where: str = "TRUE",
) -> str:
    """SQL of the table's ``columns`` as of ``position``, over ``relation`` (the name the
    files are registered under: ``register``), only the rows ``where`` (a predicate on key
    columns) selects: the mirror version's rows, those of keys the later events touch
    replaced by their latest event, none before a later truncate."""
    selected = ", ".join(quote(c) for c in columns)
    mirror = f"SELECT {selected} FROM {relation} WHERE {where}"
    if files.exact:
        return mirror
    read, events = files.read, f"{relation}_events"
    op, pos, seq = quote(OP), quote(COMMIT_POS), quote(SEQ)
    later = f"{_after_mark(read)} AND {_cutoff(position, key[0])}"
    cut = (
        f"SELECT {pos} AS cut_pos, {seq} AS cut_seq FROM {events}"
        f" WHERE {op} = 't' AND {later} ORDER BY {pos} DESC, {seq} DESC LIMIT 1"
    )
    # Equal rows of a table without a key (cdc_core.rebuild.copies).
    if COPY in read.after_schema.names:
        key = (*key, COPY)
    keys = ", ".join(quote(k) for k in key)
    newest = f"PARTITION BY {keys} ORDER BY {pos} DESC, {seq} DESC"
    latest = (
        f"SELECT {selected}, {op}, {pos}, {seq} FROM {events}"
        f" WHERE {op} <> 't' AND {later} AND ({where})"
        f" QUALIFY row_number() OVER ({newest}) = 1"
    )
    after_cut = f"cut_pos IS NULL OR {pos} > cut_pos OR ({pos} = cut_pos AND {seq} > cut_seq)"
    touched = " AND ".join(f"e.{quote(k)} IS NOT DISTINCT FROM m.{quote(k)}" for k in key)
    kept = (
        f"SELECT {selected} FROM ({mirror}) m WHERE NOT EXISTS ({cut})"
        f" AND NOT EXISTS (SELECT 1 FROM ({latest}) e WHERE {touched})"
    )
    changed = (
        f"SELECT {selected} FROM ({latest}) latest LEFT JOIN ({cut}) cut ON TRUE"
        f" WHERE {op} <> 'd' AND ({after_cut})"
    )
    return f"{kept} UNION ALL {changed}"
