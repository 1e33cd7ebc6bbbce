"""Helpers of the MariaDB pipeline tests: a pipeline over a private server's database, and
the rows of the lake's mirror and of the source, keyed alike, for exact comparison."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from cdc_core.capture.filters import TableFilter
from cdc_core.lake.layout import LakeTable
from cdc_core.names import META_COLUMNS, qualify
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from connectors.mariadb.log_source import source_config
from connectors.mariadb.snapshot import MariaDBSnapshotReader
from connectors.model import LogSource
from connectors.registry import log_source_for
from tests.cli_runs import replcheck
from tests.private_servers import MariaDBServer

Rows = dict[tuple[Any, ...], dict[str, Any]]


@contextlib.contextmanager
def mariadb_pipeline(
    server: MariaDBServer,
    database: str,
    tables: Sequence[str],
    work: Path,
    key_url: str = "",
    **settings: Any,
) -> Iterator[tuple[Pipeline, LogSource]]:
    """A pipeline from ``tables`` (canonical names, ``cdc_core.names``) of ``database`` into
    ``work/lake``, as ``cdc run`` builds it; ``key_url`` adds URL parameters (``key.t=a``)."""
    url = server.url(database) + "?heartbeat_s=0.2" + (f"&{key_url}" if key_url else "")
    source = log_source_for(url, None, tables)
    qualified = [qualify(table, database) for table in tables]
    config = PipelineConfig(
        "mariadb-test",
        work / "lake",
        work / "state",
        TableFilter.of_tables(qualified),
        **{"batch_max_events": 500, **settings},
    )
    config = replace(config, fetch_missing=source.fetch_missing)
    try:
        yield Pipeline(config, source.reader, source.snapshots), source
    finally:
        source.reader.close()


def lake_rows(lake: Path, table: str, key: Sequence[str]) -> Rows:
    """The lake mirror of ``table``, by key, without bookkeeping columns."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(LakeTable(lake, table).mirror)).to_pyarrow_table().to_pylist()
    found: Rows = {}
    for row in rows:
        locator = tuple(row[column] for column in key)
        assert locator not in found, f"key {locator} twice in the mirror of {table}"
        found[locator] = {c: v for c, v in row.items() if c not in META_COLUMNS}
    return found


def changelog(lake: Path, table: str) -> list[dict[str, Any]]:
    """Every event of the lake changelog of ``table``, in commit order."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(LakeTable(lake, table).changelog)).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda row: (row["_commit_pos"], row["_seq"]))


def source_rows(server: MariaDBServer, database: str, table: str, key: Sequence[str]) -> Rows:
    """The source table now, by key, read as the snapshot reader reads it."""
    config = source_config(server.url(database), None, (table,))
    with MariaDBSnapshotReader(config).snapshot([table]) as (_, tables):
        rows = [row for snap in tables for batch in snap.batches for row in batch.to_pylist()]
    return {tuple(row[column] for column in key): row for row in rows}


def execute(server: MariaDBServer, database: str, *statements: str) -> None:
    """Run statements on one autocommit connection."""
    with contextlib.closing(server.connect(database)) as connection, connection.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def validated(config: Path, work: Path, table: str, exclude: Sequence[str] = ()) -> dict[str, Any]:
    """``result.json`` of validating ``table`` (``schema.table``) of the config's pipeline
    source against its lake with the local engine, ``exclude`` left out of the comparison."""
    columns = f", columns: {{exclude: [{', '.join(exclude)}]}}" if exclude else ""
    judged = work / "validate.yaml"
    judged.write_text(
        config.read_text(encoding="utf-8") + "comparisons:\n"
        f"  - {{name: t, source: {{connection: src, table: {table}}},"
        f" target: {{connection: lake, table: {table}}}, engine: local{columns}}}\n",
        encoding="utf-8",
    )
    out = work / f"out-{len(exclude)}"
    done = replcheck("validate", "-c", str(judged), "--out", str(out))
    assert done.returncode in (0, 1), done.stderr[-3000:]
    document: dict[str, Any] = json.loads((out / "result.json").read_text(encoding="utf-8"))
    return document
