"""Issue 36, case 1: the binlog does not carry the child rows a foreign key's ``ON DELETE``
/ ``ON UPDATE`` ``CASCADE`` or ``SET NULL`` changes, so ``cdc run`` refuses a captured child
table with such a key before loading (exit 2, naming the table, the constraint, the parent,
the action and the way out), whether its parent is captured or not, and stops at a DDL that
adds one to a captured table. Keys without a cascading action are captured as before."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from cdc_core.lake.layout import LakeTable, high_water_mark
from connectors.mariadb.ddl import classify_alter
from tests.cli_runs import WAIT_S, catch_up, cdc_running, wait_for, write_config
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, source_rows
from tests.private_servers import MariaDBServer

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
    return write_config(work, url + "?heartbeat_s=0.2", tables)


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
    glob = _config(tmp_path / "glob", mariadb_full.url(database), [f"{database}.*"])
    done = catch_up(glob, expect=2)
    assert lines in done.stderr or notes in done.stderr, done.stderr[-3000:]
    assert "leave the table out of the pipeline's tables" in done.stderr
    assert "make them RESTRICT and delete or update the child rows explicitly" in done.stderr
    assert not (tmp_path / "glob" / "lake" / database).exists()  # nothing was loaded

    # Each child by name, without its parent.
    for table, sentence in (("order_lines", lines), ("notes", notes)):
        done = catch_up(_config(tmp_path / table, mariadb_full.url(database), [table]), expect=2)
        assert sentence in done.stderr, done.stderr[-3000:]

    # A foreign key without a cascading action is captured (its parent too).
    catch_up(_config(tmp_path / "plain", mariadb_full.url(database), ["orders", "audits"]))
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
    lake, log = LakeTable(tmp_path / "lake", f"{database}.shipments"), tmp_path / "cdc.log"
    # The DDL while the pipeline runs (one started after it refuses the table at once).
    with cdc_running(config, log) as process:
        wait_for(lambda: (high_water_mark(lake) or 0) > 0, process, log)  # the tables loaded
        execute(mariadb_full, database, statement, "DELETE FROM orders WHERE id = 1")
        process.communicate(timeout=WAIT_S)
    err = log.read_text()

    assert process.returncode == 2, err[-3000:]
    assert (
        "the foreign key fk_shipments_order (ON DELETE CASCADE) referencing orders added to a"
        " captured table: InnoDB changes the child rows of a cascade without writing them to"
        " the binlog, so the lake would keep deleted rows and old values; leave the table out"
        " of the pipeline's tables"
    ) in err
    assert f"table {database}.shipments" in err and statement in err

    done = catch_up(config, expect=2)  # started again: refused before it reads the log
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
