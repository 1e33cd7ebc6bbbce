"""Columns the pipeline cannot carry exactly are refused by name before anything is written
(issue 36, "never drop in silence"), ``ignore_columns`` lets a pipeline replicate the rest
of such a table, and the types issue 36 asked for are carried exactly.

On the real PostgreSQL cluster: ``money`` (exact cents), network, range, multirange,
geometric and interval types and ``point[]`` (the text their output function prints)
arrive in the lake as the source reads them, from the snapshot and the stream alike. Still
refused: a composite and a user-defined range type (no logical type)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake.layout import LakeTable
from cdc_core.names import META_COLUMNS
from connectors.registry import connector_for
from tests.cli_runs import catch_up, write_config
from tests.connectors.postgres.helpers import PgCase

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

TYPES = (
    "CREATE TYPE pair AS (a int, b text)",
    "CREATE TYPE floatrange AS RANGE (subtype = float8)",
)
REFUSED = {"duo": "pair", "reach": "floatrange"}
TABLE = "CREATE TABLE r (id int PRIMARY KEY, duo pair, reach floatrange, span interval, v text)"
ROW = "INSERT INTO r VALUES ({id}, '(1,x)', '[0.5,{id})', '{id} days', 'v{id}')"

# Carried column -> a value of row {id} (SQL), each type's edges included.
CARRIED = {
    "cash": "'-92233720368547758.08'::money + {id}::money",
    "addr": "'::ffff:10.0.0.{id}'",
    "net": "'10.{id}.0.0/16'",
    "mac": "'08:00:2b:01:02:0{id}'",
    "mac8": "'08:00:2b:01:02:03:04:0{id}'",
    "days": "'[1,{id}0)'",
    "amounts": "numrange(-{id}.50, NULL)",
    "stamps": "tstzrange('2024-01-0{id} 00:00:00.25+02', 'infinity', '[]')",
    "dates": "'{{[2024-01-01,2024-01-0{id}), [2024-02-01,)}}'",
    "empties": "'empty'",
    "spot": "point({id}e15, -0.1)",
    "edge": "lseg(point(0, 0), point({id}, 1e-5))",
    "frame": "box(point(1, 2), point({id}, 0))",
    "trail": "'[(1,2),({id},4)]'",
    "shape": "'((0,0),(1,{id}),(1,0))'",
    "ring": "'<(1,2),{id}.5>'",
    "rule": "'{{1,-{id},0.5}}'",
    "shapes": "ARRAY[point(1, {id}), NULL]",
    "span": "'-{id} years 2 mons -3 days +04:05:06.00000{id}'",
}
CARRIED_TYPES = {
    "cash": "money",
    "addr": "inet",
    "net": "cidr",
    "mac": "macaddr",
    "mac8": "macaddr8",
    "days": "int4range",
    "amounts": "numrange",
    "stamps": "tstzrange",
    "dates": "datemultirange",
    "empties": "int8range",
    "spot": "point",
    "edge": "lseg",
    "frame": "box",
    "trail": "path",
    "shape": "polygon",
    "ring": "circle",
    "rule": "line",
    "shapes": "point[]",
    "span": "interval",
}
CARRIED_TABLE = (
    "CREATE TABLE c (id int PRIMARY KEY, "
    + ", ".join(f"{name} {CARRIED_TYPES[name]}" for name in CARRIED)
    + ", v text)"
)


def _carried_row(row_id: int) -> str:
    values = ", ".join(value.format(id=row_id) for value in CARRIED.values())
    return f"INSERT INTO c VALUES ({row_id}, {values}, 'v{row_id}')"


def _source_rows(case: PgCase) -> dict[int, dict[str, Any]]:
    """Table c as the server prints it, in a session of the connector (money through its
    numeric cast, which lc_monetary C gives cents; arrays element by element)."""
    texts = [
        f"{name}::numeric"
        if name == "cash"
        else f"ARRAY(SELECT e::text FROM unnest({name}) WITH ORDINALITY AS u(e, n) ORDER BY n)"
        if name == "shapes"
        else f"{name}::text"
        for name in CARRIED
    ]
    connector = connector_for(case.server.url(case.database))
    with connector.connect() as connection:
        rows = connection.execute(f"SELECT id, {', '.join(texts)}, v FROM c").fetchall()
    return {row[0]: dict(zip(["id", *CARRIED, "v"], row, strict=True)) for row in rows}


def test_issue_36_types_are_carried_exactly(case: PgCase, tmp_path: Path) -> None:
    case.sql(CARRIED_TABLE, _carried_row(1), _carried_row(2))
    config = write_config(tmp_path, f"{case.server.url(case.database)}?idle_s=0.2", ["public.c"])
    catch_up(config)  # the snapshot
    expected = _source_rows(case)
    assert _lake(tmp_path, "public.c") == expected
    assert expected[1]["cash"] == Decimal("-92233720368547757.08")
    assert expected[2]["shapes"] == ["(1,2)", None]
    assert expected[2]["span"] == "P-1Y-10M-3DT4H5M6.000002S"  # -22 months, mixed signs
    case.sql(
        _carried_row(3),
        _carried_row(4),
        "UPDATE c SET addr = 'fe80::1:2/64', days = 'empty', spot = point('NaN', 1e-7),"
        " cash = '92233720368547758.07', shapes = '{}', span = '1 mon' WHERE id = 1",
        "UPDATE c SET stamps = tstzrange(NULL, '2024-06-01 12:00+05:30'), v = 'w' WHERE id = 2",
        "UPDATE c SET span = '30 days' WHERE id = 4",  # equal to '1 mon' by `=`, not the same
        "DELETE FROM c WHERE id = 3",
    )
    catch_up(config)  # the stream
    expected = _source_rows(case)
    assert sorted(expected) == [1, 2, 4]
    assert _lake(tmp_path, "public.c") == expected
    assert expected[1]["addr"] == "fe80::1:2/64" and expected[1]["days"] == "empty"
    assert (expected[1]["span"], expected[4]["span"]) == ("P1M", "P30D")


def _config(case: PgCase, work: Path, options: str = "") -> Path:
    url = f"{case.server.url(case.database)}?idle_s=0.2"
    return write_config(work, url, ["public.r"], options=options)


def _lake(work: Path, table: str = "public.r") -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    mirror = LakeTable(work / "lake", table).mirror
    rows = DeltaTable(str(mirror)).to_pyarrow_table().to_pylist()
    return {row["id"]: {k: v for k, v in row.items() if k not in META_COLUMNS} for row in rows}


def test_columns_the_pipeline_cannot_carry_are_refused_by_name(
    case: PgCase, tmp_path: Path
) -> None:
    case.sql(*TYPES, TABLE, ROW.format(id=1))
    run = catch_up(_config(case, tmp_path), expect=2)
    error = run.stderr.strip().splitlines()[-1]
    untyped = ", ".join(f"{c} ({native})" for c, native in REFUSED.items())
    assert error.startswith(f"error: table public.r: columns {untyped}: no logical type"), error
    assert "span" not in error, error  # an interval is carried (issue 36)
    names = ", ".join(REFUSED)
    assert f"ignore_columns: {{public.r: [{names}]}}" in error, error
    assert "replcheck bug" not in run.stderr and _warnings(run.stderr) == []
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").iterdir())


def test_ignored_columns_let_the_rest_of_the_table_replicate(case: PgCase, tmp_path: Path) -> None:
    case.sql(*TYPES, TABLE, ROW.format(id=1), ROW.format(id=2))
    ignored = f"ignore_columns: {{public.r: [{', '.join(REFUSED)}]}}"
    config = _config(case, tmp_path, ignored)
    first = catch_up(config)
    assert _warnings(first.stderr) == []  # ignored on purpose: nothing to warn about
    assert _lake(tmp_path) == {
        1: {"id": 1, "span": "P1D", "v": "v1"},
        2: {"id": 2, "span": "P2D", "v": "v2"},
    }
    case.sql(
        ROW.format(id=3),
        "UPDATE r SET span = span * 2, v = 'w2' WHERE id = 2",
        "UPDATE r SET duo = '(2,y)', reach = '[2,3)' WHERE id = 1",  # ignored columns only
        "DELETE FROM r WHERE id = 3",
        "INSERT INTO r (id, span, v) VALUES (4, '1 hour', 'v4')",
    )
    catch_up(config)
    assert _lake(tmp_path) == {
        1: {"id": 1, "span": "P1D", "v": "v1"},
        2: {"id": 2, "span": "P4D", "v": "w2"},
        4: {"id": 4, "span": "PT1H", "v": "v4"},
    }


def test_a_column_added_later_is_refused_by_name_too(case: PgCase, tmp_path: Path) -> None:
    """A DDL gives a captured table a column the pipeline cannot carry: the run stops naming it
    (never a warning, never a Delta error), and resumes once it is ignored."""
    case.sql(
        TYPES[0], "CREATE TABLE r (id int PRIMARY KEY, v text)", "INSERT INTO r VALUES (1, 'a')"
    )
    config = _config(case, tmp_path)
    catch_up(config)
    case.sql("ALTER TABLE r ADD COLUMN duo pair", "INSERT INTO r VALUES (2, 'b', '(1,x)')")
    stopped = catch_up(config, expect=2)
    error = stopped.stderr.strip().splitlines()[-1]
    assert "table public.r: column duo (pair): no logical type" in error, error
    assert "ignore_columns: {public.r: [duo]}" in error, error
    assert "replcheck bug" not in stopped.stderr
    catch_up(_config(case, tmp_path, "ignore_columns: {public.r: [duo]}"))
    assert _lake(tmp_path) == {1: {"id": 1, "v": "a"}, 2: {"id": 2, "v": "b"}}


def test_money_is_refused_where_lc_monetary_gives_other_than_two_digits() -> None:
    """Money is carried as its cents times 0.01: under a locale with 0 fractional digits
    (yen) that would be another amount, so such money is refused by name. This machine has
    no such locale installed: the rule itself is checked."""
    from connectors.model import SourceColumn, without_logical_type
    from connectors.postgres.snapshot import _money_refusal
    from connectors.postgres.types import logical_type

    cash = SourceColumn("cash", "money", logical_type("money"), True)
    note = SourceColumn("note", "text", logical_type("text"), True)
    yen = _money_refusal(without_logical_type, 0)
    assert "lc_monetary gives money 0 fractional digits" in (yen(cash) or "")
    assert yen(note) is None
    assert _money_refusal(without_logical_type, 2)(cash) is None


# What a first run announces it left on the server (a slot, a publication, their WAL cost).
_ANNOUNCED = ("created publication", "created replication slot", "keeps the WAL")


def _warnings(stderr: str) -> list[str]:
    """The warnings of a run, but for the announcements of what it created on the server."""
    lines = [line for line in stderr.splitlines() if "WARNING" in line]
    return [line for line in lines if not any(said in line for said in _ANNOUNCED)]
