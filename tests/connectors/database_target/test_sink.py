"""The database sink on a real PostgreSQL target: what a restarted pipeline hands it again
(after a crash between the target's commit and the pipeline's checkpoint) is skipped by the
progress rows, whole batches and parts of big transactions alike."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable

import pyarrow as pa
import pytest
import sqlalchemy as sa

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableDescription
from cdc_core.lake.layout import RefreshMarks
from cdc_core.lake.target import REFRESH_SEQ_BASE, LakeEvent, TableBatch
from cdc_core.pipeline.config import TargetOptions
from connectors.database_target.sink import ConflictError, DatabaseSink
from connectors.model import SourceColumn, TableSchema
from connectors.registry import connector_for
from connectors.sql_target import build_engine
from merkle import types as lt
from tests.private_servers import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

DESCRIPTION = TableDescription(
    "shop.t", pa.schema([("id", pa.int64()), ("v", pa.int64())]), ("id",)
)
SCHEMA = TableSchema(
    "shop.t",
    (SourceColumn("id", "bigint", lt.IntegerType()), SourceColumn("v", "int", lt.IntegerType())),
    ("id",),
)
AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _event(op: str, key: int, position: int, seq: int, v: int = 0) -> LakeEvent:
    return LakeEvent(op, {"id": key, "v": v}, position, seq, f"x{position}", AT)


def _sink(url: str) -> DatabaseSink:
    repair = connector_for(url).repair
    engine = build_engine(url, None, repair)
    return DatabaseSink(engine, repair, "p", lambda table: SCHEMA, TargetOptions(), "target")


def _rows(server: PostgresServer, database: str) -> dict[int, int]:
    with contextlib.closing(server.connect(database)) as conn:
        return dict(conn.execute("SELECT id, v FROM shop.t").fetchall())


def test_a_batch_handed_again_after_a_restart_is_skipped(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    database = postgres_database(postgres)
    url = postgres.url(database)
    batch = TableBatch(DESCRIPTION, [_event("c", 1, 5, 0), _event("c", 2, 5, 1)])
    assert _sink(url).write([batch], Position.of(5), ["shop.t"]) == 2

    again = [_event("c", 2, 5, 1), _event("u", 1, 7, 0, 9)]  # the tail of 5, then new work
    assert _sink(url).write([TableBatch(DESCRIPTION, again)], Position.of(7), ["shop.t"]) == 1

    assert _rows(postgres, database) == {1: 9, 2: 0}


def test_batches_handed_again_in_smaller_steps_never_move_the_mark_back(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    """A restart re-reads from its checkpoint, behind what the target holds, and may flush
    the re-read changes in smaller batches: recording such a batch's lower position as the
    table's mark made the next batch apply changes again (the SIGKILL test stopped on a
    delete of a row already deleted)."""
    database = postgres_database(postgres)
    url = postgres.url(database)
    written = [_event("c", 1, 5, 0), _event("c", 2, 6, 0), _event("d", 1, 8, 0)]
    assert _sink(url).write([TableBatch(DESCRIPTION, written)], Position.of(8), ["shop.t"]) == 3

    restarted = _sink(url)
    step = [TableBatch(DESCRIPTION, written[:1])]
    assert restarted.write(step, Position.of(5), ["shop.t"]) == 0
    step = [TableBatch(DESCRIPTION, [*written[1:], _event("c", 3, 9, 0)])]
    assert restarted.write(step, Position.of(9), ["shop.t"]) == 1  # not the delete again

    assert _rows(postgres, database) == {2: 0, 3: 0}
    assert _sink(url).load_position("shop.t") == 9


def test_parts_of_a_big_transaction_are_written_once(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    database = postgres_database(postgres)
    url = postgres.url(database)
    first = [_event("c", k, 9, k) for k in range(3)]
    assert _sink(url).write_part([TableBatch(DESCRIPTION, first)], Position.of(9)) == 3

    everything = [*first, *[_event("c", k, 9, k) for k in range(3, 5)]]
    restarted = _sink(url)
    assert restarted.write([TableBatch(DESCRIPTION, everything)], Position.of(9), ["shop.t"]) == 2

    assert _rows(postgres, database) == dict.fromkeys(range(5), 0)


def test_an_insert_of_a_row_the_target_has_stops_naming_its_key(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    database = postgres_database(postgres)
    url = postgres.url(database)
    batch = TableBatch(DESCRIPTION, [_event("c", 1, 5, 0)])
    _sink(url).write([batch], Position.of(5), ["shop.t"])

    inserted_again = TableBatch(DESCRIPTION, [_event("c", 2, 7, 0), _event("c", 1, 7, 1)])
    with pytest.raises(ConflictError, match="key id=1 is already in the target"):
        _sink(url).write([inserted_again], Position.of(7), ["shop.t"])
    assert _rows(postgres, database) == {1: 0}  # the batch was rolled back whole


KEYED_BY_V = TableDescription(DESCRIPTION.table, DESCRIPTION.schema, ("v",))
LOADING = RefreshMarks({"shop.t": 0})  # a loading refresh of shop.t under way
LOADED = RefreshMarks()


def _key(url: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        return list(sa.inspect(engine).get_pk_constraint("t", schema="shop")["constrained_columns"])
    finally:
        engine.dispose()


def test_a_new_key_moves_the_table_aside_even_after_a_crash_before_the_move(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    """The pipeline checkpointed a key change's reload and died before ``retire_table``: the
    next batch finds the target keyed otherwise, moves it aside and loads a table keyed anew,
    where a change may come before its row's chunk, until the marks show the load done."""
    database = postgres_database(postgres)
    url = postgres.url(database)
    loaded = [_event("c", 1, 5, 0), _event("c", 2, 5, 1, v=20)]
    _sink(url).write([TableBatch(DESCRIPTION, loaded)], Position.of(5), ["shop.t"])

    before_chunk = TableBatch(KEYED_BY_V, [_event("u", 3, 7, 0, v=30)])  # a row not loaded yet
    _sink(url).write([before_chunk], Position.of(7), ["shop.t"], LOADING)
    assert _key(url) == ["v"] and _rows(postgres, database) == {3: 30}
    delete = TableBatch(KEYED_BY_V, [_event("d", 2, 8, 0, v=20)])  # a restart: still loading
    _sink(url).write([delete], Position.of(8), ["shop.t"], LOADING)
    chunk = [_event("r", 1, 9, REFRESH_SEQ_BASE), _event("r", 3, 9, REFRESH_SEQ_BASE + 1, v=30)]
    _sink(url).write([TableBatch(KEYED_BY_V, chunk)], Position.of(9), ["shop.t"], LOADED)

    assert _rows(postgres, database) == {1: 0, 3: 30}
    with contextlib.closing(postgres.connect(database)) as conn:
        assert conn.execute("SELECT count(*) FROM shop.t__retired_7").fetchone() == (2,)
    absent = TableBatch(KEYED_BY_V, [_event("u", 4, 10, 0, v=40)])
    with pytest.raises(ConflictError, match="key v=40 is absent"):  # loaded: checked again
        _sink(url).write([absent], Position.of(10), ["shop.t"], LOADED)


def test_a_table_moved_aside_before_its_flag_is_loaded_anew(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    """A crash between ``retire_table``'s rename and its progress row: no target table, and
    a progress row of the old table's writes. The next batch creates it, loading."""
    database = postgres_database(postgres)
    url = postgres.url(database)
    sink = _sink(url)
    sink.write([TableBatch(DESCRIPTION, [_event("c", 1, 5, 0)])], Position.of(5), ["shop.t"])
    sink.tables.retire("shop.t", Position.of(6))  # the rename alone

    changes = [_event("u", 2, 7, 0, v=20), _event("d", 1, 7, 1)]  # rows not loaded yet
    _sink(url).write([TableBatch(KEYED_BY_V, changes)], Position.of(7), ["shop.t"], LOADING)
    assert _key(url) == ["v"] and _rows(postgres, database) == {2: 20}
