"""Awkward table and column names in the lake, read back by deltalake and by Spark.

What cdc_core.names states about delta-rs and Spark is checked here on the real libraries:
tables under every awkward name part, holding a column of every awkward name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_core.lake.layout import LakeTable, append_changelog, changelog_files
from cdc_core.names import TableName, backtick_quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.spark]

TABLE_PARTS = [
    "order-lines",
    "my table",
    "a`b",
    'a"b',
    "v1.2",
    "select",
    "MixedCase",
    "données",
    "😀",
    "a=b",
    "50%",
    "a#b?c",
    "[x]{y}*",
    ".hidden",
    "_replcheck",
]
COLUMNS = [
    "id",
    "my col",
    "a,b;c{d}(e)",
    "a\nb\tc",
    "a=b",
    "a.b",
    "a`b",
    'a"b',
    "a'b",
    "données",
    "😀",
    "select",
    "MixedCase",
    "1abc",
    "$x#y",
    "",
    " lead",
]


def _events() -> object:
    import pyarrow as pa

    from cdc_core.lake.layout import meta_fields

    fields = [pa.field(name, pa.int64()) for name in COLUMNS] + meta_fields()
    rows = [
        {**{name: index * 10 + n for n, name in enumerate(COLUMNS)}, "_op": "c"}
        | {"_commit_pos": 7, "_seq": index, "_txid": "t", "_commit_ts": None}
        for index in range(2)
    ]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


@pytest.mark.parametrize("part", TABLE_PARTS)
def test_awkward_tables_and_columns_read_back_by_deltalake_and_spark(
    tmp_path: Path, spark: SparkSession, part: str
) -> None:
    table = LakeTable(tmp_path / "lake", str(TableName(part, "sch.ema")))
    events = _events()
    append_changelog(table, events, 7, "7", "app")  # type: ignore[arg-type]
    assert table.root.parent.parent == tmp_path / "lake"
    assert not (tmp_path / "lake" / "_replcheck").exists()
    assert DeltaTable(str(table.changelog)).to_pyarrow_table().to_pylist() == (
        events.to_pylist()  # type: ignore[attr-defined]
    )
    files, _ = changelog_files(table)
    frame = spark.read.option("mergeSchema", "true").parquet(*files)
    assert frame.columns == events.column_names  # type: ignore[attr-defined]
    picked = frame.select(*(backtick_quote(name) for name in COLUMNS)).orderBy("`_seq`")
    assert [tuple(row) for row in picked.collect()] == [
        tuple(index * 10 + n for n in range(len(COLUMNS))) for index in range(2)
    ]


def test_columns_differing_only_in_case_are_told_apart_by_spark_not_by_delta(
    tmp_path: Path, spark: SparkSession
) -> None:
    import pyarrow as pa

    frame = spark.createDataFrame([(1, 2, 3)], ["Amount", "amount", "a.b"])
    picked = frame.select(*(backtick_quote(c) for c in ["amount", "Amount", "a.b"])).collect()
    assert [tuple(row) for row in picked] == [(2, 1, 3)]
    # Delta column names are case-insensitive: the pipeline refuses such a table up front.
    with pytest.raises(Exception, match=r"(?i)duplicate field name"):
        write_deltalake(str(tmp_path / "t"), pa.table({"Amount": [1], "amount": [2]}))


def test_tables_differing_only_in_escapable_parts_get_their_own_directories(
    tmp_path: Path,
) -> None:
    names = ["a b", "a~20b", "a_b", "a.b", "A B"]
    roots = {LakeTable(tmp_path, str(TableName(name, "s"))).root for name in names}
    assert len(roots) == len(names)
