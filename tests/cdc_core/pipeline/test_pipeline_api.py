"""The pipeline's API and rules: schema changes, truncates, filters, stop, callbacks, errors."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from cdc_core.capture.events import Begin, RawChange, RowChange
from cdc_core.capture.filters import TableFilter
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableDescription
from cdc_core.errors import ConfigError
from cdc_core.lake.layout import LakeTable, high_water_mark
from cdc_core.lake.sink import LakeSink, SchemaChangeError
from cdc_core.pipeline.checkpoint import CheckpointCorruptError
from cdc_core.pipeline.initial_load import LakeTableInUseError
from cdc_core.pipeline.loop import EmittedTransaction, Pipeline, PipelineConfig
from cdc_core.state.directory import StateDirectory
from connectors.synthetic.log_reader import SyntheticSource
from connectors.synthetic.workload import Workload, WorkloadSpec
from tests.cdc_core.lake_model import (
    changelog_events,
    expected_events,
    final_state,
    mirror_rows,
    read_delta,
)
from tests.cdc_core.scripted_source import ScriptedSource

ORDERS = "shop.orders"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("qty", pa.int32())])


def _config(tmp_path: Path, tables: TableFilter, **overrides: object) -> PipelineConfig:
    return PipelineConfig(
        "p1",
        tmp_path / "lake",
        tmp_path / "state",
        tables,
        batch_max_events=100,
        **overrides,  # type: ignore[arg-type]
    )


def _scripted(key: tuple[str, ...] = ("id",)) -> ScriptedSource:
    return ScriptedSource({ORDERS: TableDescription(ORDERS, SCHEMA, key)})


def _run(tmp_path: Path, source: ScriptedSource, tables: TableFilter | None = None) -> None:
    config = _config(tmp_path, tables or TableFilter.of_tables([ORDERS]))
    Pipeline(config, source, source).run_until_caught_up()


def _rows(tmp_path: Path, part: str = "changelog") -> list[dict[str, object]]:
    table = LakeTable(tmp_path / "lake", ORDERS)
    return read_delta(table.changelog if part == "changelog" else table.mirror)


def test_added_column_appears_without_rewriting_the_lake(tmp_path: Path) -> None:
    source = _scripted()
    source.commit([("c", ORDERS, {"id": 1, "qty": 5})])
    _run(tmp_path, source)
    first_files = set(DeltaTable(str(tmp_path / "lake/shop/orders/changelog")).file_uris())
    source.alter(ORDERS, SCHEMA.append(pa.field("note", pa.string())))
    source.commit([("c", ORDERS, {"id": 2, "qty": 6, "note": "new"})])

    _run(tmp_path, source)

    by_id = {row["id"]: row for row in _rows(tmp_path)}
    assert by_id[1]["note"] is None and by_id[2]["note"] == "new"
    assert first_files <= set(DeltaTable(str(tmp_path / "lake/shop/orders/changelog")).file_uris())
    assert {row["id"]: row["note"] for row in _rows(tmp_path, "mirror")} == {1: None, 2: "new"}


def test_dropped_column_stays_in_the_lake_and_is_null_afterwards(tmp_path: Path) -> None:
    source = _scripted()
    source.commit([("c", ORDERS, {"id": 1, "qty": 5})])
    _run(tmp_path, source)
    source.alter(ORDERS, pa.schema([pa.field("id", pa.int64())]))
    source.commit([("c", ORDERS, {"id": 2})])

    _run(tmp_path, source)

    assert {row["id"]: row["qty"] for row in _rows(tmp_path)} == {1: 5, 2: None}


def test_widened_column_keeps_the_lake_type_while_values_fit(tmp_path: Path) -> None:
    source = _scripted()
    source.commit([("c", ORDERS, {"id": 1, "qty": 5})])
    _run(tmp_path, source)
    source.alter(ORDERS, pa.schema([pa.field("id", pa.int64()), pa.field("qty", pa.int64())]))
    source.commit([("c", ORDERS, {"id": 2, "qty": 7})])
    _run(tmp_path, source)
    schema = DeltaTable(str(tmp_path / "lake/shop/orders/changelog")).schema().to_arrow()
    assert pa.schema(schema).field("qty").type == pa.int32()
    source.commit([("c", ORDERS, {"id": 3, "qty": 2**40})])

    with pytest.raises(SchemaChangeError, match=r"column qty of table shop\.orders changed type"):
        _run(tmp_path, source)
    assert {row["id"] for row in _rows(tmp_path)} == {1, 2}  # nothing half-written


def test_truncate_empties_the_mirror_and_is_in_the_changelog(tmp_path: Path) -> None:
    source = _scripted()
    source.commit([("c", ORDERS, {"id": 1, "qty": 1}), ("c", ORDERS, {"id": 2, "qty": 2})])
    _run(tmp_path, source)
    source.commit([("c", ORDERS, {"id": 3, "qty": 3})])
    source.commit([("t", ORDERS, None)])
    source.commit([("c", ORDERS, {"id": 4, "qty": 4})])

    _run(tmp_path, source)

    assert [row["id"] for row in _rows(tmp_path, "mirror")] == [4]
    assert [row["_op"] for row in sorted(_rows(tmp_path), key=lambda r: r["_commit_pos"])] == [
        *"cccc"[:3],
        "t",
        "c",
    ]


def test_table_without_key_has_a_changelog_and_no_mirror(tmp_path: Path) -> None:
    source = _scripted(key=())
    source.commit([("c", ORDERS, {"id": 1, "qty": 1}), ("c", ORDERS, {"id": 1, "qty": 1})])

    _run(tmp_path, source)

    assert len(_rows(tmp_path)) == 2
    assert not LakeTable(tmp_path / "lake", ORDERS).mirror.exists()


def test_filter_policies_and_ignored_columns(tmp_path: Path) -> None:
    workload = Workload(WorkloadSpec(seed=2, transactions=60, tables=3))
    source = SyntheticSource(workload)
    tables = TableFilter(
        "accept", drop=("synthetic.t2",), ignore_columns={"synthetic.t0": frozenset({"note"})}
    )
    config = _config(tmp_path, tables)

    Pipeline(config, source, source, tables=workload.spec.table_names).run_until_caught_up()

    lake = tmp_path / "lake"
    assert not LakeTable(lake, "synthetic.t2").root.exists()
    assert "note" not in read_delta(LakeTable(lake, "synthetic.t0").changelog)[0]
    # seq numbers the captured changes of a transaction only: compare without it
    written = [k[:2] + k[3:] for k in changelog_events(lake, "synthetic.t1").elements()]
    expected = [k[:2] + k[3:] for k in expected_events(workload, "synthetic.t1").elements()]
    assert sorted(written, key=repr) == sorted(expected, key=repr)
    assert TableFilter("drop", accept=("shop.*",)).select(["shop.a", "crm.b"]) == ["shop.a"]
    with pytest.raises(ConfigError, match="accept policy takes drop patterns"):
        TableFilter("accept", accept=("x",))


def test_callbacks_and_iterator_see_each_durable_transaction_in_commit_order(
    tmp_path: Path,
) -> None:
    workload = Workload(WorkloadSpec(seed=4, transactions=80))
    source = SyntheticSource(workload)
    seen: list[EmittedTransaction] = []
    config = _config(tmp_path, TableFilter.of_tables(workload.spec.table_names))
    pipeline = Pipeline(config, source, source, on_transaction=seen.append)

    iterated = list(pipeline.iter_transactions(until=workload.end_position()))

    assert iterated == seen
    positions = [transaction.commit_pos for transaction in seen]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)
    written = sum(len(transaction.events) for transaction in seen)
    assert written == len(workload.expected())
    assert pipeline.metrics().events == written


def test_stop_from_another_thread_checkpoints_and_a_restart_finishes(tmp_path: Path) -> None:
    workload = Workload(WorkloadSpec(seed=6, transactions=400))
    source = SyntheticSource(workload)
    config = _config(tmp_path, TableFilter.of_tables(workload.spec.table_names))
    first_batch = threading.Event()
    pipeline = Pipeline(config, source, source, on_transaction=lambda _: first_batch.set())
    runner = threading.Thread(target=pipeline.run)
    runner.start()
    first_batch.wait(timeout=120)
    pipeline.stop()
    runner.join(timeout=120)
    assert not runner.is_alive()
    stopped_at = pipeline.metrics().position
    assert stopped_at is not None and stopped_at < workload.end_position()

    Pipeline(config, source, source).run_until_caught_up()

    for table in workload.spec.table_names:
        assert changelog_events(tmp_path / "lake", table) == expected_events(workload, table)
        assert mirror_rows(tmp_path / "lake", table) == final_state(workload, table)


def test_run_until_stops_at_the_position(tmp_path: Path) -> None:
    workload = Workload(WorkloadSpec(seed=8, transactions=200))
    source = SyntheticSource(workload)
    middle = [e.commit_pos for e in workload.expected()][len(workload.expected()) // 2]
    config = _config(tmp_path, TableFilter.of_tables(workload.spec.table_names))

    reached = Pipeline(config, source, source).run_until(Position.of(middle))

    assert reached is not None and reached.value >= middle
    table = workload.spec.table_names[0]
    written = changelog_events(tmp_path / "lake", table)
    expected = expected_events(workload, table)
    assert written == Counter({k: n for k, n in expected.items() if k[1] <= reached.value})
    assert written != expected  # it did stop before the end
    assert high_water_mark(LakeTable(tmp_path / "lake", table)) == reached.value


def test_corrupt_checkpoint_is_reported_with_the_fix(tmp_path: Path) -> None:
    source = _scripted()
    source.commit([("c", ORDERS, {"id": 1, "qty": 5})])
    _run(tmp_path, source)
    path = StateDirectory(tmp_path / "state").checkpoint
    path.write_bytes(path.read_bytes()[:-3])

    with pytest.raises(CheckpointCorruptError, match="corrupt or truncated; restore it"):
        _run(tmp_path, source)


def test_existing_lake_table_of_someone_else_is_refused(tmp_path: Path) -> None:
    workload = Workload(WorkloadSpec(seed=1, transactions=5, tables=1))
    source = SyntheticSource(workload)
    config = _config(tmp_path, TableFilter.of_tables(workload.spec.table_names))
    Pipeline(config, source, source).run_until_caught_up()
    other = PipelineConfig(
        "p2", config.lake, tmp_path / "other-state", config.tables, batch_max_events=10
    )

    with pytest.raises(LakeTableInUseError, match="has not loaded it; remove it there"):
        Pipeline(other, source, source).run_until_caught_up()


def test_a_run_with_nothing_to_do_returns_the_position_the_lake_holds(tmp_path: Path) -> None:
    """Run again once caught up: it writes nothing and says where the lake is, not None (the
    Oracle generative tester found it restarting a pipeline that had reached the end)."""
    source = _scripted()
    source.commit([("c", ORDERS, {"id": 1, "qty": 5})])
    config = _config(tmp_path, TableFilter.of_tables([ORDERS]))
    reached = Pipeline(config, source, source).run_until_caught_up()

    again = Pipeline(config, source, source).run_until_caught_up()

    assert again == reached == source.end_position()


def test_state_dir_of_another_pipeline_is_refused(tmp_path: Path) -> None:
    source = _scripted()
    source.commit([("c", ORDERS, {"id": 1, "qty": 5})])
    _run(tmp_path, source)
    other = PipelineConfig("p2", tmp_path / "lake", tmp_path / "state", TableFilter.of_tables([]))

    with pytest.raises(ConfigError, match="belongs to pipeline 'p1'"):
        Pipeline(other, source, source).run_until_caught_up()


def test_a_blocked_sink_stops_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Back pressure: while the sink cannot write, the reader is not asked for more."""
    workload = Workload(WorkloadSpec(seed=3, transactions=300))
    read = 0

    class CountingSource(SyntheticSource):
        def iter_changes(self, start: Position | None) -> Iterator[RawChange | Idle]:
            nonlocal read
            for item in super().iter_changes(start):
                read += 1
                yield item

    blocked, release = threading.Event(), threading.Event()
    original = LakeSink.write

    def slow_write(self: LakeSink, *args: Any, **kwargs: Any) -> int:
        if not release.is_set():
            blocked.set()
            release.wait(timeout=120)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LakeSink, "write", slow_write)
    source = CountingSource(workload)
    config = _config(tmp_path, TableFilter.of_tables(workload.spec.table_names))
    runner = threading.Thread(target=Pipeline(config, source, source).run_until_caught_up)
    runner.start()
    assert blocked.wait(timeout=120)
    read_when_blocked = read
    runner.join(timeout=0.5)  # give a runaway reader time to show itself
    assert read == read_when_blocked
    release.set()
    runner.join(timeout=120)
    assert read > read_when_blocked


def test_an_open_transaction_is_reported_and_does_not_block_catching_up(tmp_path: Path) -> None:
    source = _scripted()
    first = source.commit([("c", ORDERS, {"id": 1, "qty": 5})])
    source.log.append(Begin("open-1", Position.of(first.value + 5)))
    source.log.append(
        RowChange("open-1", Position.of(first.value + 6), "c", ORDERS, (9,), {"id": 9, "qty": 1})
    )
    source.counter = first.value + 6
    pipeline = Pipeline(_config(tmp_path, TableFilter.of_tables([ORDERS])), source, source)

    reached = pipeline.run_until_caught_up()

    assert reached == Position.of(first.value + 6)
    figures = pipeline.metrics()
    assert figures.open_transactions == 1
    assert figures.oldest_open is not None and figures.oldest_open[0] == "open-1"
    assert figures.oldest_open[2] == 1
    assert [row["id"] for row in _rows(tmp_path)] == [1]  # the open one is not in the lake


def test_a_table_added_later_is_loaded_then_streamed(tmp_path: Path) -> None:
    customers = "shop.customers"
    source = ScriptedSource(
        {
            ORDERS: TableDescription(ORDERS, SCHEMA, ("id",)),
            customers: TableDescription(customers, SCHEMA, ("id",)),
        },
        snapshot_now=True,
    )
    both = TableFilter.of_tables([ORDERS, customers])
    source.commit([("c", ORDERS, {"id": 1, "qty": 1}), ("c", customers, {"id": 7, "qty": 7})])
    _run(tmp_path, source)  # orders only
    source.commit([("u", customers, {"id": 7, "qty": 8}), ("c", customers, {"id": 9, "qty": 9})])
    added = source.end_position()
    _run(tmp_path, source, both)  # loads customers as they are now
    source.commit([("d", customers, {"id": 9, "qty": 9}), ("c", ORDERS, {"id": 2, "qty": 2})])

    _run(tmp_path, source, both)

    lake = LakeTable(tmp_path / "lake", customers)
    events = sorted(read_delta(lake.changelog), key=lambda r: (r["_commit_pos"], r["_seq"]))
    assert [(r["_op"], r["id"], r["qty"]) for r in events] == [
        ("r", 7, 8),
        ("r", 9, 9),
        ("d", 9, 9),
    ]
    assert {r["_commit_pos"] for r in events if r["_op"] == "r"} == {added.value}
    assert [row["id"] for row in read_delta(lake.mirror)] == [7]
    assert sorted(row["id"] for row in _rows(tmp_path, "mirror")) == [1, 2]


def test_a_transaction_bigger_than_a_batch_is_written_in_bounded_parts(tmp_path: Path) -> None:
    spec = WorkloadSpec(
        seed=9, transactions=12, tables=2, big_every=4, big_changes=700, rollback_rate=0.0
    )
    workload = Workload(spec)
    source = SyntheticSource(workload)
    seen: list[EmittedTransaction] = []
    tables = TableFilter.of_tables(spec.table_names)
    config = replace(_config(tmp_path, tables), batch_max_events=60)

    Pipeline(config, source, source, on_transaction=seen.append).run_until_caught_up()

    assert max(len(emitted.events) for emitted in seen) <= 60
    parted = {emitted.txid for emitted in seen if not emitted.last}
    assert len(parted) == 3  # the three big transactions
    for txid in parted:
        parts = [emitted for emitted in seen if emitted.txid == txid]
        assert [p.part for p in parts] == list(range(len(parts))) and parts[-1].last
    for table in spec.table_names:
        assert changelog_events(tmp_path / "lake", table) == expected_events(workload, table)
        assert mirror_rows(tmp_path / "lake", table) == final_state(workload, table)
