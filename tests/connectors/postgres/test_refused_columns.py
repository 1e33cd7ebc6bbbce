"""Columns the pipeline cannot carry exactly are refused by name before anything is written
(issue 36, "never drop in silence"), and ``ignore_columns`` lets a pipeline replicate the
rest of such a table.

On the real PostgreSQL cluster: types without a logical type (``money``, ``inet``, ``cidr``,
``macaddr``, ``int4range``, ``point[]``), which the stream and the snapshot used to leave out
with a warning, and ``interval``, which a Delta lake has no type for (the writer crashed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake import META_COLUMNS, LakeTable
from tests.cli_runs import catch_up, write_config
from tests.connectors.postgres.helpers import PgCase

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

REFUSED = {
    "cash": "money",
    "addr": "inet",
    "net": "cidr",
    "mac": "macaddr",
    "days": "int4range",
    "shapes": "point[]",
    "span": "interval",
}
TABLE = (
    "CREATE TABLE r (id int PRIMARY KEY, cash money, addr inet, net cidr, mac macaddr,"
    " days int4range, shapes point[], span interval, v text)"
)
ROW = (
    "INSERT INTO r VALUES ({id}, 1.5, '10.0.0.{id}', '10.{id}.0.0/16', '08:00:2b:01:02:0{id}',"
    " '[1,{id}0)', '{{\"(1,{id})\"}}', '{id} days', 'v{id}')"
)


def _config(case: PgCase, work: Path, options: str = "") -> Path:
    url = f"{case.server.url(case.database)}?idle_s=0.2"
    return write_config(work, url, ["public.r"], options=options)


def _lake(work: Path) -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    mirror = LakeTable(work / "lake", "public.r").mirror
    rows = DeltaTable(str(mirror)).to_pyarrow_table().to_pylist()
    return {row["id"]: {k: v for k, v in row.items() if k not in META_COLUMNS} for row in rows}


def test_columns_the_pipeline_cannot_carry_are_refused_by_name(
    case: PgCase, tmp_path: Path
) -> None:
    case.sql(TABLE, ROW.format(id=1))
    run = catch_up(_config(case, tmp_path), expect=2)
    error = run.stderr.strip().splitlines()[-1]
    untyped = ", ".join(f"{c} ({native})" for c, native in REFUSED.items() if c != "span")
    assert error.startswith(f"error: table public.r: columns {untyped}: no logical type"), error
    assert "; column span (interval): no type in a Delta lake" in error, error
    names = ", ".join(REFUSED)
    assert f"ignore_columns: {{public.r: [{names}]}}" in error, error
    assert "replcheck bug" not in run.stderr and "WARNING" not in run.stderr
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").iterdir())


def test_ignored_columns_let_the_rest_of_the_table_replicate(case: PgCase, tmp_path: Path) -> None:
    case.sql(TABLE, ROW.format(id=1), ROW.format(id=2))
    ignored = f"ignore_columns: {{public.r: [{', '.join(REFUSED)}]}}"
    config = _config(case, tmp_path, ignored)
    first = catch_up(config)
    assert "WARNING" not in first.stderr  # ignored on purpose: nothing to warn about
    assert _lake(tmp_path) == {1: {"id": 1, "v": "v1"}, 2: {"id": 2, "v": "v2"}}
    case.sql(
        ROW.format(id=3),
        "UPDATE r SET span = span * 2, v = 'w2' WHERE id = 2",
        "UPDATE r SET addr = '10.9.9.9', days = '[2,3)' WHERE id = 1",  # ignored columns only
        "DELETE FROM r WHERE id = 3",
        "INSERT INTO r (id, span, v) VALUES (4, '1 hour', 'v4')",
    )
    catch_up(config)
    assert _lake(tmp_path) == {
        1: {"id": 1, "v": "v1"},
        2: {"id": 2, "v": "w2"},
        4: {"id": 4, "v": "v4"},
    }


def test_a_column_added_later_is_refused_by_name_too(case: PgCase, tmp_path: Path) -> None:
    """A DDL gives a captured table a column the lake cannot hold: the run stops naming it
    (never a warning, never a Delta error), and resumes once it is ignored."""
    case.sql("CREATE TABLE r (id int PRIMARY KEY, v text)", "INSERT INTO r VALUES (1, 'a')")
    config = _config(case, tmp_path)
    catch_up(config)
    case.sql("ALTER TABLE r ADD COLUMN span interval", "INSERT INTO r VALUES (2, 'b', '1 day')")
    stopped = catch_up(config, expect=2)
    error = stopped.stderr.strip().splitlines()[-1]
    assert "table public.r: column span (interval): no type in a Delta lake" in error, error
    assert "ignore_columns: {public.r: [span]}" in error, error
    assert "replcheck bug" not in stopped.stderr
    catch_up(_config(case, tmp_path, "ignore_columns: {public.r: [span]}"))
    assert _lake(tmp_path) == {1: {"id": 1, "v": "a"}, 2: {"id": 2, "v": "b"}}
