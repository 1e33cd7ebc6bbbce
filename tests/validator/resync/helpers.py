"""Shared pieces of the re-sync tests: result documents, configs, command-line clients."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.private_servers import MariaDBServer, PostgresServer
from tests.reports.sample import make_comparison, wrap
from validator.config import ComparisonConfig


def result_for(
    configured: ComparisonConfig,
    differences: Sequence[tuple[str, Sequence[str | None]]],
    finished: dt.datetime | None = None,
) -> dict[str, Any]:
    """A schema-valid result of the ``configured`` comparison listing ``(kind, key)``
    differences, keys as display text the way the validator prints them."""
    comparison = make_comparison(configured.name)
    comparison.update(source=configured.source_label, target=configured.target_label)
    detailed: list[dict[str, Any]] = [{"key": list(key), "kind": kind} for kind, key in differences]
    for item in detailed:
        if item["kind"] == "changed":
            item["columns"] = []
        if item["kind"] == "duplicate_key":
            item.update(side="target", count=2)
    counts: dict[str, int] = {}
    for kind, _ in differences:
        counts[kind] = counts.get(kind, 0) + 1
    comparison.update(
        status="differences" if differences else "in_sync",
        differences=detailed,
        differences_total=len(detailed),
        counts_by_kind=counts,
        mismatched_leaves={"0": len(detailed)} if detailed else {},
    )
    document = wrap([comparison])
    moment = finished or dt.datetime.now(dt.UTC)
    document["finished"] = moment.isoformat()
    return document


def write_config(path: Path, connections: dict[str, str], comparison: str, extra: str = "") -> Path:
    """A config file with ``connections`` (name -> url or ``lake:PATH``) and one comparison
    block (YAML text, indented under ``comparisons:``)."""
    lines = ["connections:"]
    for name, where in connections.items():
        if where.startswith("lake:"):
            lines.append(f'  {name}: {{lake: "{where[5:]}"}}')
        else:
            lines.append(f'  {name}: {{url: "{where}"}}')
    lines += ["comparisons:", comparison.rstrip(), extra.rstrip()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_sql_file_postgres(
    server: PostgresServer, database: str, path: Path, *, other_quoting: bool = False
) -> None:
    """Run a SQL file with ``psql``, stopping at the first error; ``other_quoting``: in a
    session whose string literals read backslashes as escapes
    (``standard_conforming_strings=off``), not as the server reads them by default."""
    env = {**os.environ, "PGPASSWORD": server.password}
    if other_quoting:
        env["PGOPTIONS"] = "-c standard_conforming_strings=off"
    command = [
        "psql",
        f"host={server.host} port={server.port} user={server.user} dbname={database}",
        "-v",
        "ON_ERROR_STOP=1",
        "-q",
        "-f",
        str(path),
    ]
    subprocess.run(command, check=True, env=env, capture_output=True, text=True)


def run_sql_file_mariadb(
    server: MariaDBServer, database: str, path: Path, *, other_quoting: bool = False
) -> None:
    """Run a SQL file with the ``mariadb`` client (utf8mb4), stopping at the first error;
    ``other_quoting``: in a session whose string literals read a backslash as an ordinary
    character (``NO_BACKSLASH_ESCAPES``), not as the server reads them by default."""
    command = [
        "mariadb",
        "--no-defaults",
        f"--host={server.host}",
        f"--port={server.port}",
        f"--user={server.user}",
        "--default-character-set=utf8mb4",
        *(
            ["--init-command=SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'"]
            if other_quoting
            else []
        ),
        database,
    ]
    if server.password:
        command.insert(2, f"--password={server.password}")
    with path.open("rb") as sql:
        subprocess.run(command, check=True, stdin=sql, capture_output=True)
