"""Issue 36, case 1: the binlog does not carry the child rows a foreign key's ``ON DELETE``
/ ``ON UPDATE`` ``CASCADE`` or ``SET NULL`` changes, so ``cdc run`` refuses a captured child
table with such a key before loading (exit 2, naming the table, the constraint, the parent,
the action and the way out), whether its parent is captured or not, and stops at a DDL that
adds one to a captured table. Keys without a cascading action are captured as before."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from cdc_core.lake import LakeTable, high_water_mark
from connectors.mariadb.ddl import classify_alter
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, source_rows
from tests.private_servers import MariaDBServer

ROOT = Path(__file__).resolve().parents[3]

PARENT = "CREATE TABLE orders (id INT PRIMARY KEY, placed VARCHAR(20))"
CHILDREN = (
    "CREATE TABLE order_lines (id INT PRIMARY KEY, order_id INT, CONSTRAINT fk_lines_order"
    " FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE CASCADE)",
    "CREATE TABLE notes (id INT PRIMARY KEY, order_id INT,"
    " FOREIGN KEY (order_id) REFERENCES orders (id) ON UPDATE CASCADE ON DELETE SET NULL)",
    "CREATE TABLE audits (id INT PRIMARY KEY, order_id INT REFERENCES orders (id))",
)
ROWS = (
    "INSERT INTO orders VALUES (1, 'a'), (2, 'b')",
    "INSERT INTO order_lines VALUES (10, 1), (11, 2)",
    "INSERT INTO notes VALUES (20, 1)",
    "INSERT INTO audits VALUES (30, 1)",
)


def _config(work: Path, url: str, tables: Sequence[str]) -> Path:
    work.mkdir(parents=True, exist_ok=True)
    config = work / "replcheck.yaml"
    config.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(url + '?heartbeat_s=0.2')}}}\n"
        f"  lake: {{lake: {json.dumps(str(work / 'lake'))}}}\n"
        "pipelines:\n"
        f"  - {{name: p, source: src, target: lake, tables: {json.dumps(list(tables))},"
        f" state_dir: {json.dumps(str(work / 'state'))}}}\n",
        encoding="utf-8",
    )
    return config


def _cdc_run(config: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    return subprocess.run(
        [*command, "--pipeline", "p", "--until-caught-up"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.integration
@pytest.mark.mariadb
def test_captured_children_with_cascades_are_refused_before_loading(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    database = mariadb_database(mariadb_full)
    execute(mariadb_full, database, PARENT, *CHILDREN, *ROWS)

    lines = (
        f"table {database}.order_lines has the cascading foreign key fk_lines_order (ON DELETE"
        f" CASCADE) referencing {database}.orders:"
    )
    notes = (
        f"table {database}.notes has the cascading foreign key notes_ibfk_1 (ON DELETE SET NULL"
        f" ON UPDATE CASCADE) referencing {database}.orders:"
    )
    # A glob: a child is refused before anything is loaded, with the way out.
    done = _cdc_run(_config(tmp_path / "glob", mariadb_full.url(database), [f"{database}.*"]))
    assert done.returncode == 2, done.stderr[-3000:]
    assert lines in done.stderr or notes in done.stderr, done.stderr[-3000:]
    assert "leave the table out of the pipeline's tables" in done.stderr
    assert "make them RESTRICT and delete or update the child rows explicitly" in done.stderr
    assert not (tmp_path / "glob" / "lake" / database).exists()  # nothing was loaded

    # Each child by name, without its parent.
    for table, sentence in (("order_lines", lines), ("notes", notes)):
        done = _cdc_run(_config(tmp_path / table, mariadb_full.url(database), [table]))
        assert done.returncode == 2, done.stderr[-3000:]
        assert sentence in done.stderr, done.stderr[-3000:]

    # A foreign key without a cascading action is captured (its parent too).
    done = _cdc_run(_config(tmp_path / "plain", mariadb_full.url(database), ["orders", "audits"]))
    assert done.returncode == 0, done.stderr[-3000:]
    for table in ("orders", "audits"):
        lake = lake_rows(tmp_path / "plain" / "lake", f"{database}.{table}", ["id"])
        assert lake == source_rows(mariadb_full, database, table, ["id"])


@pytest.mark.integration
@pytest.mark.mariadb
def test_a_ddl_adding_a_cascade_to_a_captured_table_stops_the_pipeline(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full,
        database,
        PARENT,
        "CREATE TABLE shipments (id INT PRIMARY KEY, order_id INT)",
        ROWS[0],
        "INSERT INTO shipments VALUES (40, 1), (41, 2)",
    )
    config = _config(tmp_path, mariadb_full.url(database), ["orders", "shipments"])
    statement = (
        "ALTER TABLE shipments ADD CONSTRAINT fk_shipments_order FOREIGN KEY (order_id)"
        " REFERENCES orders (id) ON DELETE CASCADE"
    )
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    process = subprocess.Popen(
        [*command, "--pipeline", "p"], cwd=ROOT, stderr=subprocess.PIPE, text=True
    )
    try:  # the DDL while the pipeline runs (one started after it refuses the table at once)
        lake = LakeTable(tmp_path / "lake", f"{database}.shipments")
        deadline = time.monotonic() + 120
        while (high_water_mark(lake) or 0) == 0 and process.poll() is None:
            assert time.monotonic() < deadline, "cdc run did not load the tables"
            time.sleep(0.2)
        execute(mariadb_full, database, statement, "DELETE FROM orders WHERE id = 1")
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 2, err[-3000:]
    assert (
        "the foreign key fk_shipments_order (ON DELETE CASCADE) referencing orders added to a"
        " captured table: InnoDB changes the child rows of a cascade without writing them to"
        " the binlog, so the lake would keep deleted rows and old values; leave the table out"
        " of the pipeline's tables"
    ) in err
    assert f"table {database}.shipments" in err and statement in err

    done = _cdc_run(config)  # started again: refused before it reads the log
    assert done.returncode == 2
    assert f"table {database}.shipments has the cascading foreign key fk_shipments_order" in (
        done.stderr
    )


@pytest.mark.parametrize(
    ("clause", "added"),
    [
        (
            "ADD CONSTRAINT `fk a` FOREIGN KEY (p) REFERENCES par (id) ON DELETE CASCADE",
            "the foreign key `fk a` (ON DELETE CASCADE) referencing par",
        ),
        (
            "ADD FOREIGN KEY (p) REFERENCES `s`.`par`(id) ON UPDATE SET NULL ON DELETE CASCADE",
            "the foreign key (ON UPDATE SET NULL ON DELETE CASCADE) referencing `s`.`par`",
        ),
        (
            "ADD COLUMN q INT REFERENCES par (id) on delete  set default",
            "the foreign key (on delete set default) referencing par",
        ),
    ],
)
def test_a_clause_adding_a_cascading_key_stops(clause: str, added: str) -> None:
    action, reason = classify_alter(f" ADD INDEX (x), {clause}")
    assert action == "stop"
    assert reason.startswith(f"{added} added to a captured table: InnoDB changes")


@pytest.mark.parametrize(
    "clause",
    [
        "ADD CONSTRAINT fk FOREIGN KEY (p) REFERENCES par (id) ON DELETE RESTRICT",
        "ADD FOREIGN KEY (p) REFERENCES par (id) ON UPDATE NO ACTION",
        "ADD COLUMN c TIMESTAMP NULL ON UPDATE CURRENT_TIMESTAMP",
        "ADD COLUMN c VARCHAR(40) NULL COMMENT 'REFERENCES x ON DELETE CASCADE'",
    ],
)
def test_other_clauses_do_not_stop(clause: str) -> None:
    assert classify_alter(f" {clause}")[0] != "stop"
