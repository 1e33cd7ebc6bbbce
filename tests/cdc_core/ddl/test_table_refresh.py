"""The table refresh over a hand-written log whose snapshots answer as of where the stream is.

A loading refresh reads a table in chunks while the log keeps changing it. A change of a row
no chunk has read yet is dropped (its chunk holds its effect) — unless it moved the row to a
key whose range was read already: that key is read once more at the end.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from cdc_core.capture.events import ABSENT, Begin, Commit, RawChange, RowChange
from cdc_core.capture.filters import TableFilter
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged, TableChunk, TableDescription, TableSnapshot
from cdc_core.ddl.table_refresh import RefreshState, TableRefresher
from cdc_core.lake.layout import LakeTable, read_marks
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from tests.cdc_core.lake_model import changelog_state, read_delta

TABLE, OTHER = "shop.items", "shop.other"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


class MovingSource:
    """A table that exists before the log starts, a log of raw changes, and chunked
    snapshots taken at the position the stream has reached (exact, as a real source's)."""

    def __init__(self, rows: Mapping[int, str], log: Sequence[RawChange | TableChanged]) -> None:
        self.initial = {(key,): {"id": key, "name": name} for key, name in rows.items()}
        self.log = list(log)
        self.reached = Position.of(0)
        self.chunks: list[tuple[int, list[int]]] = []  # (position, keys) of every read

    def describe(self, table: str) -> TableDescription:
        return TableDescription(table, SCHEMA, ("id",))

    def end_position(self) -> Position:
        return self.log[-1].position

    def iter_changes(self, start: Position | None) -> Iterator[RawChange | TableChanged | Idle]:
        for item in self.log:
            if start is None or item.position >= start:
                self.reached = item.position
                yield item
        while True:
            yield Idle(self.end_position())

    def close(self) -> None:
        pass

    def _state(self) -> dict[Hashable, dict[str, object]]:
        rows, pending = dict(self.initial), []
        for item in self.log:
            if item.position > self.reached:
                break
            if isinstance(item, RowChange):
                pending.append(item)
            elif isinstance(item, Commit):
                for change in pending:
                    before = rows.pop(change.locator, {})
                    if change.op != "d":
                        after = {c: v for c, v in (change.after or {}).items() if v is not ABSENT}
                        rows[(after.get("id", change.locator[0]),)] = {**before, **after}  # type: ignore[index]
                pending = []
        return rows

    def read_chunk(self, table: str, after: tuple[object, ...] | None, limit: int) -> TableChunk:
        keys = sorted(key for key in self._state() if after is None or key > after)[:limit]
        self.chunks.append((self.reached.value, [key[0] for key in keys]))  # type: ignore[misc]
        last = keys[-1] if len(keys) == limit else None
        return TableChunk(self.reached, self._snapshot(table, keys), last)  # type: ignore[arg-type]

    @contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        wanted = list((keys or {}).get(tables[0], ()))
        if keys is not None:  # a refresh's read by key (not the other table's initial load)
            self.chunks.append((self.reached.value, [key[0] for key in wanted]))  # type: ignore[misc]
        yield self.reached, iter([self._snapshot(tables[0], wanted)])

    def _snapshot(self, table: str, keys: Sequence[Hashable]) -> TableSnapshot:
        state = self._state()
        rows = [state[key] for key in keys if key in state]
        batches = pa.Table.from_pylist(rows, SCHEMA).to_batches()
        return TableSnapshot(self.describe(table), iter(batches))


def _transaction(txid: str, first: int, *changes: RowChange) -> list[RawChange]:
    commit = Commit(txid, Position.of(first + len(changes) + 1), datetime(2026, 1, 1, tzinfo=UTC))
    return [Begin(txid, Position.of(first)), *changes, commit]


def test_a_row_moved_into_a_range_already_read_is_read_again_at_the_end(tmp_path: Path) -> None:
    rows = {key: f"row{key}" for key in [*range(1, 5), *range(6, 21), 500]}
    only_key = {"id": 500, "name": ABSENT}  # MINIMAL images: only the key moves
    move = RowChange("m", Position.of(31), "u", TABLE, (500,), {"id": 5, "name": ABSENT}, only_key)
    log = [
        TableChanged(Position.of(10), TABLE, "refresh", "CREATE TABLE items", "table created"),
        *_transaction("m", 30, move),
        *_transaction(
            "o", 40, RowChange("o", Position.of(41), "c", OTHER, (1,), {"id": 1, "name": "x"})
        ),
    ]
    source = MovingSource(rows, log)
    config = PipelineConfig(
        "moves", tmp_path / "lake", tmp_path / "state", TableFilter.of_tables(["shop.*"]),
        refresh_chunk_rows=10,
    )  # fmt: skip
    Pipeline(config, source, source, tables=[OTHER]).run_until_caught_up()

    expected = {(key,): {"id": key, "name": f"row{key}"} for key in [*range(1, 5), *range(6, 21)]}
    expected[(5,)] = {"id": 5, "name": "row500"}
    lake = tmp_path / "lake"
    mirror = {
        (r["id"],): {"id": r["id"], "name": r["name"]}
        for r in read_delta(LakeTable(lake, TABLE).mirror)
    }
    assert mirror == changelog_state(lake, TABLE, ("id",)) == expected
    assert [keys for _, keys in source.chunks] == [
        [1, 2, 3, 4, 6, 7, 8, 9, 10, 11],  # before the move
        [12, 13, 14, 15, 16, 17, 18, 19, 20],  # after it: 500 is gone from this range
        [5],  # the key the dropped change moved a row to, read once more
    ]
    assert TABLE not in read_marks(lake).refreshing


def test_keys_remembered_under_a_refresh_are_pending_once_in_order() -> None:
    # A key shift of a whole table under refresh remembers every row's new key; each is read
    # once more at the end, and the checkpoint holds them all (kept beside the states and
    # folded into them when the states are read).
    since = Position.of(10)
    refresher = TableRefresher((RefreshState(TABLE, since, True, pending=((3,),)),), {})
    for key in [5, 3, 7, 5, *range(100, 2100)]:
        if refresher.state_of(TABLE) is not None:
            refresher.remember(TABLE, (key,))
    refresher.remember(OTHER, (1,))  # no refresh of it under way: nothing to read again
    expected = ((3,), (5,), (7,), *((key,) for key in range(100, 2100)))
    assert [state.pending for state in refresher.states] == [expected]
    recorded = RefreshState.from_dict(refresher.states[0].to_dict())
    assert recorded.pending == expected
    refresher.remember(TABLE, (7,))
    refresher.remember(TABLE, (9,))
    assert refresher.states[0].pending == (*expected, (9,))
    refresher.start(RefreshState(TABLE, Position.of(20), False))  # again from the first row
    refresher.remember(TABLE, (7,))
    assert [(s.since, s.loading, s.pending) for s in refresher.states] == [(since, True, ((7,),))]
