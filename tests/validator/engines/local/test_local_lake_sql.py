"""The local engine's SQL over lake files, without a server: the types it names for DuckDB
are DuckDB's own, a column no file holds reads as NULL, a leaf filter keeps exactly its
leaves' rows, reading a lake of the usual types never imports pandas (0.2 s a run), and a
mirror version with the changelog's later events laid over it is the state at a position."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from cdc_core.lake.layout import LakeTable
from connectors.pushdown import RangeLeaves
from merkle.layout import RowLayout
from merkle.types import IntegerType, StringType
from tests.validator.lake_sample import write_sample_lake
from validator.engines.local.lake import DuckDBHashedLake, leaf_bits_sql, leaves_filter_sql
from validator.engines.local.state import (
    TYPE_NAMES,
    LakeFiles,
    duckdb_types,
    lake_files,
    register,
    state_sql,
)
from validator.engines.sides.keys import KeyFinding

ROOT = Path(__file__).resolve().parents[4]
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("amount", pa.decimal128(12, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("note", pa.string()),
        ("added", pa.int32()),  # added after the file was written: in no file
    ]
)


@pytest.mark.parametrize("kind", [*TYPE_NAMES, pa.decimal128(38, 18), pa.decimal128(5, 0)])
def test_the_type_names_are_duckdbs_own(kind: pa.DataType) -> None:
    connection = duckdb.connect()
    schema = pa.schema([("x", kind)])
    assert duckdb_types(connection, schema) == [str(t) for t in _from_arrow(connection, schema)]


def test_other_types_are_left_to_duckdb() -> None:
    schema = pa.schema([("x", pa.list_(pa.int64())), ("y", pa.timestamp("ns"))])
    assert duckdb_types(duckdb.connect(), schema) == ["BIGINT[]", "TIMESTAMP_NS"]


def _from_arrow(connection: duckdb.DuckDBPyConnection, schema: pa.Schema) -> list[object]:
    return list(connection.from_arrow(schema.empty_table()).types)


def _lake(tmp_path: Path) -> LakeFiles:
    rows = pa.table(
        {
            "id": pa.array([1, 2, 40], pa.int64()),
            "amount": pa.array([Decimal("1.50"), None, Decimal("2.25")], pa.decimal128(12, 2)),
            "at": pa.array([0, 1, 2], pa.timestamp("us", tz="UTC")),
            "note": ["a", "b", None],
        }
    )
    pq.write_table(rows, tmp_path / "part-0.parquet")
    return LakeFiles.of_version((str(tmp_path / "part-0.parquet"),), SCHEMA)


def test_a_registered_lake_has_the_tables_types_and_nulls_for_absent_columns(
    tmp_path: Path,
) -> None:
    connection = duckdb.connect()
    register(connection, "lake", _lake(tmp_path))
    described = connection.execute("DESCRIBE lake").fetchall()
    assert [(row[0], row[1]) for row in described] == [
        ("id", "BIGINT"),
        ("amount", "DECIMAL(12,2)"),
        ("at", "TIMESTAMP WITH TIME ZONE"),
        ("note", "VARCHAR"),
        ("added", "INTEGER"),
    ]
    assert connection.execute("SELECT count(*), count(added) FROM lake").fetchall() == [(3, 0)]
    register(connection, "empty", LakeFiles.of_version((), SCHEMA))
    assert connection.execute("SELECT count(*) FROM empty").fetchall() == [(0,)]
    assert [row[1] for row in connection.execute("DESCRIBE empty").fetchall()][:2] == [
        "BIGINT",
        "DECIMAL(12,2)",
    ]


def test_a_leaf_filter_keeps_exactly_its_leaves(tmp_path: Path) -> None:
    connection = duckdb.connect()
    wanted = set(range(0, 1 << 20, 3))
    bits = leaf_bits_sql("leaf", 1 << 20, wanted)
    kept = connection.execute(f"SELECT leaf FROM range(0, 1 << 20) t(leaf) WHERE {bits}")
    assert {row[0] for row in kept.fetchall()} == wanted
    register(connection, "lake", _lake(tmp_path))
    scheme = RangeLeaves(1, 10, 3)  # keys 1..80: id 1 and 2 in leaf 0, id 40 in leaf 3
    most = {0, 1, 2, 4, 5, 6, 7}  # ranges covering most leaves are left out
    for leaves, ids in (
        ({3}, [(40,)]),
        ({0, 3}, [(1,), (2,), (40,)]),
        ({5}, []),
        (most, [(1,), (2,)]),
        (most | {3}, [(1,), (2,), (40,)]),
    ):
        where = leaves_filter_sql("id", scheme, leaves)
        assert (
            connection.execute(f"SELECT id FROM lake WHERE {where} ORDER BY id").fetchall() == ids
        )
    assert " >= " in leaves_filter_sql("id", scheme, {3})
    assert " >= " not in leaves_filter_sql("id", scheme, most)
    assert leaves_filter_sql("id", scheme, ()) == "FALSE"


def test_reading_a_lake_of_the_usual_types_never_imports_pandas(tmp_path: Path) -> None:
    _lake(tmp_path)
    script = textwrap.dedent(
        f"""
        import sys
        import duckdb
        import pyarrow as pa
        from validator.engines.local.state import LakeFiles, register
        from validator.engines.local.lake import leaf_bits_sql
        schema = pa.schema([("id", pa.int64()), ("note", pa.string())])
        connection = duckdb.connect()
        register(connection, "lake", LakeFiles.of_version(({str(tmp_path / "part-0.parquet")!r},),
                 schema))
        where = leaf_bits_sql("id", 64, {{1, 2}})
        assert connection.execute(f"SELECT count(*) FROM lake WHERE {{where}}").fetchall() == [(2,)]
        print("pandas" in sys.modules)
        """
    )
    finished = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert finished.stdout.strip() == "False"


def test_the_columns_phase_reads_the_rows_the_keys_phase_kept(tmp_path: Path) -> None:
    """The rows of a few mismatched leaves are kept by the keys phase: the columns phase
    reads them, not the lake again (here its file is gone by then)."""
    file = tmp_path / "part-0.parquet"
    pq.write_table(
        pa.table({"id": pa.array(range(1000), pa.int64()), "v": [f"v{i}" for i in range(1000)]}),
        file,
    )
    connection = duckdb.connect()
    connection.execute(f"CREATE VIEW lake AS SELECT * FROM read_parquet('{file}')")
    layout = RowLayout.of([("id", IntegerType()), ("v", StringType())], ["id"])
    types = {"id": pa.int64(), "v": pa.string()}
    scheme = RangeLeaves(0, 100, 4)
    lake = DuckDBHashedLake(connection, "SELECT id, v FROM lake", layout, types, scheme, None)
    keys = lake.keys([2, 5])
    assert len(keys) == 200 and lake.found == {2, 5}
    file.unlink()
    entry = next(e for e in keys.values() if e.values == (250,))
    key_bytes = next(b for b, e in keys.items() if e is entry)
    finding = KeyFinding("changed", ("250",), None, entry, key_bytes)
    rows = lake.rows([finding])
    assert list(rows) == [key_bytes]
    assert rows[key_bytes][1] == [250, "v250"]
    with pytest.raises(duckdb.IOException):  # a leaf not kept is read from the lake
        lake.rows([KeyFinding("changed", ("950",), None, replace(entry, leaf=9), b"x")])


def _replayed(table: LakeTable, position: int) -> set[tuple[Any, ...]]:
    """The state at ``position`` by the definition: each key's latest event at or below it,
    no delete, nothing before the newest truncate (a reference, in Python)."""
    events = DeltaTable(str(table.changelog)).to_pyarrow_table().to_pylist()
    events = sorted((e for e in events if e["_commit_pos"] <= position), key=_order)
    cut = max((_order(e) for e in events if e["_op"] == "t"), default=(-1, -1))
    latest = {e["id"]: e for e in events if e["_op"] != "t"}
    return {
        (e["id"], e["v"], e.get("w"))
        for e in latest.values()
        if e["_op"] != "d" and _order(e) > cut
    }


def _order(event: dict[str, Any]) -> tuple[int, int]:
    return event["_commit_pos"], event["_seq"]


def test_the_mirror_with_the_changelogs_later_events_is_the_state_at_every_position(
    tmp_path: Path,
) -> None:
    """Batches at 5, 7 (a truncate), 8, a column added, and 12 (events at 11 and 12): at
    every position DuckDB's read of the mirror version and the events after it is the state
    the definition gives."""
    lake = write_sample_lake(tmp_path)
    connection = duckdb.connect()
    for position in range(4, 14):
        files = lake_files(lake, position)
        register(connection, "lake", files)
        sql = state_sql("lake", files, ["id", "v", "w"], ["id"], position)
        found = {tuple(row) for row in connection.execute(sql).fetchall()}
        assert found == _replayed(lake, position), position
        assert files.exact == (position not in (4, 11)), position  # 4: no version yet
