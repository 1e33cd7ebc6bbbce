"""Progress of the initial load: which table, rows so far, rows/s and what is left, never
"position None, 0 events"; and the position an initial load reached when nothing followed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.pipeline.metrics import MetricsTracker
from tests.connectors.mariadb.pipeline_helpers import execute, mariadb_pipeline
from tests.private_servers import MariaDBServer
from validator import cli
from validator.commands.cdc import describe_progress

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]


def test_the_initial_load_reports_its_table_rows_rate_and_estimate(
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full,
        database,
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "INSERT INTO a SELECT seq, seq FROM seq_1_to_3000",
        "CREATE TABLE b (id INT PRIMARY KEY)",
        "ANALYZE TABLE a",
    )
    lines: list[str] = []
    with mariadb_pipeline(mariadb_full, database, ["a", "b"], tmp_path) as (pipeline, _):
        count = MetricsTracker.loaded_rows

        def count_and_report(tracker: MetricsTracker, rows: int) -> None:
            count(tracker, rows)  # the rows are in the lake: what a progress line shows now
            lines.append(describe_progress(pipeline.metrics()))

        monkeypatch.setattr(MetricsTracker, "loaded_rows", count_and_report)
        pipeline.run_until_caught_up()
        after = describe_progress(pipeline.metrics())
    assert f"initial load: table 1/2 {database}.a, 500 rows" in lines[0]
    assert "rows/s" in lines[0] and "of about" in lines[0] and "s left" in lines[0]
    assert f"table 1/2 {database}.a, 3,000 rows" in lines[5]
    assert "initial load" not in after and "position None" not in after


def test_cdc_run_after_a_load_alone_names_the_snapshot_position(
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full, database, "CREATE TABLE a (id INT PRIMARY KEY)", "INSERT INTO a VALUES (1)"
    )
    config = tmp_path / "c.yaml"
    config.write_text(
        f"connections:\n  src: {{url: '{mariadb_full.url(database)}?heartbeat_s=0.2'}}\n"
        f"  lake: {{lake: '{tmp_path / 'lake'}'}}\n"
        f"pipelines:\n  - {{name: p, source: src, target: lake, tables: [{database}.a],"
        f" state_dir: '{tmp_path / 'state'}'}}\n"
    )
    assert cli.run(["cdc", "run", "-c", str(config), "--pipeline", "p", "--until-caught-up"]) == 0
    said = capsys.readouterr().out
    assert "up to position" in said and "None" not in said
