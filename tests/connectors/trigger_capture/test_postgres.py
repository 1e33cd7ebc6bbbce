"""PostgreSQL trigger capture on the private server: concurrent sessions whose commit order
differs from their start order, a transaction between its commit trigger and its commit, a
long transaction, rollbacks, the exact raw changes, and ``replcheck cdc run`` killed under
concurrent writers, compared with the source read with plain SQL and by ``replcheck
validate``."""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import signal
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdc_core.capture.events import RawChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged
from connectors.registry import capture_dialect_for, connector_for, log_source_for
from connectors.trigger_capture.install import apply_plan, plan_capture
from tests.connectors.mariadb.pipeline_helpers import changelog, lake_rows
from tests.connectors.postgres.helpers import PgCase
from tests.connectors.trigger_capture.helpers import (
    pipeline_config,
    read_to_idle,
    replcheck,
    show,
    start_replcheck,
    transactions,
    validate_in_sync,
)

pytestmark = [pytest.mark.integration, pytest.mark.postgres]
AT = dt.datetime(2024, 2, 29, 10, tzinfo=dt.UTC)


def _url(pg: PgCase) -> str:
    return pg.server.url(pg.database) + "?capture=trigger"


def _install(pg: PgCase) -> None:
    dialect = capture_dialect_for(_url(pg), None, ["t"])
    apply_plan(dialect, plan_capture(dialect, "install", ["t"]), lambda _: None, False)


@contextlib.contextmanager
def _changes(pg: PgCase, start: int = 0) -> Iterator[Iterator[RawChange | TableChanged | Idle]]:
    source = log_source_for(_url(pg), None, ["t"])
    try:
        yield source.reader.iter_changes(Position.of(start))
    finally:
        source.reader.close()


def _row(id_: int, name: str) -> dict[str, Any]:
    return {"id": id_, "name": name, "amount": Decimal("1.50"), "at": AT}


def _insert(session: psycopg.Connection[Any], id_: int, name: str) -> None:
    session.execute("INSERT INTO t VALUES (%s, %s, 1.5, '2024-02-29 10:00:00+00')", (id_, name))


def _triggers(pg: PgCase) -> list[tuple[str, ...]]:
    rows = pg.connection.execute(
        "SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal"
        " ORDER BY 1, 2"
    )
    return [tuple(row) for row in rows]


def test_install_capture_is_idempotent_and_a_dry_run_changes_nothing(
    pg: PgCase, tmp_path: Path
) -> None:
    config = str(pipeline_config(tmp_path, _url(pg), ["public.t"]))
    dry = replcheck("cdc", "install-capture", "-c", config, "--pipeline", "p", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "CREATE CONSTRAINT TRIGGER at_commit" in dry.stdout and _triggers(pg) == []
    for _ in range(2):
        done = replcheck("cdc", "install-capture", "-c", config, "--pipeline", "p")
        assert done.returncode == 0, done.stderr
        assert _triggers(pg) == [
            ("at_commit", "replcheck_capture.markers"),
            ("replcheck_capture", "t"),
            ("replcheck_capture_truncate", "t"),
        ]
    for _ in range(2):
        removed = replcheck("cdc", "remove-capture", "-c", config, "--pipeline", "p")
        assert removed.returncode == 0, removed.stderr
        assert _triggers(pg) == []
    schema = pg.connection.execute("SELECT to_regnamespace('replcheck_capture')").fetchone()
    assert schema == (None,)


def test_the_later_transaction_committing_first_is_read_first_and_a_rollback_never(
    pg: PgCase,
) -> None:
    _install(pg)
    early, late, other = pg.session(), pg.session(), pg.session()
    _insert(early, 1, "early")  # starts first, commits last
    _insert(other, 3, "rolled back")
    _insert(late, 2, "late")
    late.commit()
    other.rollback()
    with _changes(pg) as changes:
        first, idle = read_to_idle(changes)
        early.execute("UPDATE t SET name = 'early, updated' WHERE id = 1")
        early.commit()
        second, later = read_to_idle(changes)
    assert [show(c)[:4] for c in first] == [
        ("begin", 1),
        ("c", 1, "public.t", (2,)),
        ("commit", 1),
    ]
    assert show(first[1])[4] == _row(2, "late") and idle == Position.of(1)
    assert [show(c) for c in second] == [
        ("begin", 2),
        ("c", 2, "public.t", (1,), _row(1, "early")),
        ("u", 2, "public.t", (1,), _row(1, "early, updated")),
        ("commit", 2),
    ]
    assert later == Position.of(2)


def test_a_transaction_between_its_commit_trigger_and_its_commit_holds_the_frontier(
    pg: PgCase,
) -> None:
    _install(pg)
    committing, after = pg.session(), pg.session()
    # IMMEDIATE fires the commit trigger at the end of the statement: commit value 1 is taken
    # while the transaction stays open, as it is for an instant at every COMMIT.
    committing.execute("SET CONSTRAINTS ALL IMMEDIATE")
    _insert(committing, 1, "committing")
    _insert(after, 2, "after")
    after.commit()  # commit value 2, visible while 1 is not
    with _changes(pg) as changes:
        held, idle = read_to_idle(changes)
        committing.commit()
        both, later = read_to_idle(changes)
    assert held == [] and idle == Position.of(0)  # 2 waits: 1 may still commit below it
    assert transactions(both)[0][1:] == (1, 1) and transactions(both)[1][1:] == (2, 1)
    assert later == Position.of(2)


def test_a_gap_whose_transaction_rolls_back_closes(pg: PgCase) -> None:
    _install(pg)
    aborted, after = pg.session(), pg.session()
    aborted.execute("SET CONSTRAINTS ALL IMMEDIATE")
    _insert(aborted, 1, "aborted")  # takes commit value 1, then rolls back
    _insert(after, 2, "after")
    after.commit()
    with _changes(pg) as changes:
        held, _ = read_to_idle(changes)
        aborted.rollback()
        read, idle = read_to_idle(changes)
    assert held == []
    assert [show(c)[:4] for c in read] == [
        ("begin", 2),
        ("c", 2, "public.t", (2,)),
        ("commit", 2),
    ]
    assert idle == Position.of(2)


def test_a_long_transaction_holds_nothing_back_and_comes_whole_at_its_commit(
    pg: PgCase,
) -> None:
    _install(pg)
    long = pg.session()
    for id_ in range(100, 150):
        _insert(long, id_, "long")
    with _changes(pg) as changes:
        for id_ in range(10):
            pg.sql(f"INSERT INTO t VALUES ({id_}, 'short', 1.5, '2024-02-29 10:00:00+00')")
        short, idle = read_to_idle(changes)
        long.commit()
        last, end = read_to_idle(changes)
    assert [position for _, position, _ in transactions(short)] == list(range(1, 11))
    assert idle == Position.of(10)
    assert [(position, count) for _, position, count in transactions(last)] == [(11, 50)]
    assert end == Position.of(11)


def test_a_restarted_reader_resumes_after_its_position_and_purge_keeps_what_is_ahead(
    pg: PgCase,
) -> None:
    _install(pg)
    for id_ in range(5):
        pg.sql(f"INSERT INTO t VALUES ({id_}, 'r', 1.5, '2024-02-29 10:00:00+00')")
    source = log_source_for(_url(pg), None, ["t"])
    try:
        resumed, idle = read_to_idle(source.reader.iter_changes(Position.of(3)))
        source.reader.acknowledge(Position.of(4))  # type: ignore[attr-defined]
        left = pg.connection.execute(
            'SELECT id FROM replcheck_capture."log_public.t" ORDER BY 1'
        ).fetchall()
    finally:
        source.reader.close()
    assert [(position, count) for _, position, count in transactions(resumed)] == [(4, 1), (5, 1)]
    assert idle == Position.of(5) and left == [(4,)]


def _writer(url: str, seed: int, count: int, done: threading.Event) -> None:
    """Random transactions, a fifth rolled back, every tenth one held open a while."""
    rng = random.Random(seed)
    try:
        with contextlib.closing(psycopg.connect(url)) as session:
            for number in range(count):
                try:
                    for _ in range(rng.randint(1, 5)):
                        _random_change(session, rng, number)
                except (psycopg.errors.DeadlockDetected, psycopg.errors.UniqueViolation):
                    session.rollback()  # writers collide on keys: that one is lost, as in life
                    continue
                if number % 10 == 0:
                    time.sleep(rng.uniform(0, 0.3))  # a long transaction others pass
                if rng.random() < 0.2:
                    session.rollback()
                else:
                    session.commit()
    finally:
        done.set()


def _random_change(session: psycopg.Connection[Any], rng: random.Random, number: int) -> None:
    new = rng.randint(1, 300)
    kind = rng.choice("iiuumd")
    if kind == "i":
        session.execute(
            "INSERT INTO t VALUES (%s, %s, %s, now()) ON CONFLICT (id) DO UPDATE"
            " SET name = excluded.name",
            (new, f"n{number}", Decimal(rng.randint(0, 10**6)) / 100),
        )
    elif kind == "u":
        session.execute("UPDATE t SET amount = amount + 1 WHERE id = %s", (new,))
    elif kind == "m":
        session.execute(
            "UPDATE t SET id = %s WHERE id = %s AND NOT EXISTS (SELECT 1 FROM t WHERE id = %s)",
            (new, rng.randint(1, 300), new),
        )
    else:
        session.execute("DELETE FROM t WHERE id = %s", (new,))


def _source(pg: PgCase) -> dict[tuple[Any, ...], dict[str, Any]]:
    rows = pg.connection.execute("SELECT id, name, amount, at FROM t").fetchall()
    return {
        (id_,): {"id": id_, "name": name, "amount": amount, "at": at.astimezone(dt.UTC)}
        for id_, name, amount, at in rows
    }


def test_cdc_run_killed_under_concurrent_writers_ends_equal_to_the_source(
    pg: PgCase, tmp_path: Path
) -> None:
    pg.sql("INSERT INTO t SELECT g, 'before', g, now() FROM generate_series(1, 100) g")
    config = str(pipeline_config(tmp_path, _url(pg), ["public.t"]))
    installed = replcheck("cdc", "install-capture", "-c", config, "--pipeline", "p")
    assert installed.returncode == 0, installed.stderr
    url = pg.server.dsn(pg.database)
    done = [threading.Event() for _ in range(3)]
    writers = [
        threading.Thread(target=_writer, args=(url, seed, 200, event))
        for seed, event in enumerate(done)
    ]
    rng, log, kills = random.Random(7), tmp_path / "pipeline.log", 0
    for writer in writers:
        writer.start()
    while (not all(event.is_set() for event in done) or kills < 3) and kills < 40:
        process = start_replcheck(log, "cdc", "run", "-c", config, "--pipeline", "p")
        time.sleep(rng.uniform(2.0, 5.0))
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
    for writer in writers:
        writer.join()
    assert (tmp_path / "state" / "checkpoint").exists()  # killed runs got to the lake
    final = replcheck("cdc", "run", "-c", config, "--pipeline", "p", "--until-caught-up")
    assert final.returncode == 0, final.stderr + log.read_text()[-3000:]
    assert lake_rows(tmp_path / "lake", "public.t", ["id"]) == _source(pg)
    events = changelog(tmp_path / "lake", "public.t")
    positions = [(event["_commit_pos"], event["_seq"]) for event in events]
    assert len(positions) == len(set(positions))  # no transaction written twice
    validate_in_sync(Path(config), "public.t", "public.t", tmp_path / "validated")


def test_the_initial_load_meets_the_capture_and_the_pipeline_follows_it(
    pg: PgCase, tmp_path: Path
) -> None:
    from connectors.pipeline import open_pipeline

    _install(pg)
    pg.sql("INSERT INTO t SELECT g, 'before', g, now() FROM generate_series(1, 20) g")
    open_ = pg.session()
    _insert(open_, 100, "open at the snapshot")  # commits after the snapshot: streamed
    config = pipeline_config(tmp_path, _url(pg), ["public.t"])
    with open_pipeline(config, "p") as pipeline:
        pipeline.run_until_caught_up()
    open_.commit()
    pg.sql("UPDATE t SET name = 'after' WHERE id <= 5", "DELETE FROM t WHERE id = 20")
    with open_pipeline(config, "p") as pipeline:
        pipeline.run_until_caught_up()
    assert lake_rows(tmp_path / "lake", "public.t", ["id"]) == _source(pg)
    ops = [event["_op"] for event in changelog(tmp_path / "lake", "public.t")]
    assert ops == ["r"] * 20 + ["c"] + ["u"] * 5 + ["d"]
    # The validator reads the same connection: libpq never sees the capture parameter.
    assert connector_for(_url(pg)).reflect("public.t").primary_key == ("id",)


def test_a_rolled_back_last_commit_value_does_not_hold_the_end_back(pg: PgCase) -> None:
    _install(pg)
    pg.sql("INSERT INTO t VALUES (1, 'kept', 1.5, '2024-02-29 10:00:00+00')")
    aborted = pg.session()
    aborted.execute("SET CONSTRAINTS ALL IMMEDIATE")
    _insert(aborted, 2, "aborted")  # takes commit value 2, the sequence's end
    with _changes(pg) as changes:
        kept, idle = read_to_idle(changes)
        aborted.rollback()
        nothing, end = read_to_idle(changes)
    assert transactions(kept)[0][1:] == (1, 1) and idle == Position.of(1)
    assert nothing == [] and end == Position.of(2)  # --until-caught-up can finish


def test_a_truncate_is_captured_in_its_place_in_the_transaction(pg: PgCase, tmp_path: Path) -> None:
    from connectors.pipeline import open_pipeline

    _install(pg)
    pg.sql("INSERT INTO t SELECT g, 'before', g, now() FROM generate_series(1, 5) g")
    config = pipeline_config(tmp_path, _url(pg), ["public.t"])
    with open_pipeline(config, "p") as pipeline:
        pipeline.run_until_caught_up()
    session = pg.session()
    session.execute("TRUNCATE t")
    _insert(session, 7, "after the truncate")
    session.commit()
    with _changes(pg, start=1) as changes:  # 1: the five inserts
        read, _ = read_to_idle(changes)
    assert [show(c)[:4] for c in read] == [
        ("begin", 2),
        ("t", 2, "public.t", None),
        ("c", 2, "public.t", (7,)),
        ("commit", 2),
    ]
    with open_pipeline(config, "p") as pipeline:
        pipeline.run_until_caught_up()
    assert lake_rows(tmp_path / "lake", "public.t", ["id"]) == _source(pg)


def test_an_application_role_without_grants_on_the_capture_writes_as_before(pg: PgCase) -> None:
    _install(pg)
    role = f"app_{pg.database}"
    pg.sql(
        f"CREATE ROLE {role}",
        f"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON t TO {role}",
    )
    try:
        session = pg.session()
        session.execute(f"SET ROLE {role}")
        _insert(session, 1, "by the application")
        session.execute("UPDATE t SET id = 2 WHERE id = 1")
        session.commit()
        with _changes(pg) as changes:
            read, _ = read_to_idle(changes)
        assert [show(c)[:4] for c in read] == [
            ("begin", 1),
            ("c", 1, "public.t", (1,)),
            ("d", 1, "public.t", (1,)),
            ("c", 1, "public.t", (2,)),
            ("commit", 1),
        ]
    finally:
        session.rollback()
        session.execute("RESET ROLE")
        session.commit()
        pg.sql(f"REVOKE ALL ON t FROM {role}", f"DROP ROLE {role}")


def test_a_key_moved_to_a_value_its_type_holds_equal_is_a_delete_and_an_insert(
    pg: PgCase,
) -> None:
    """An interval key moved from '1 mon' to '30 days': equal to the type's `=`, yet another
    value (the lake keys rows by the interval's text, issue 36), so the trigger records the
    move as a delete and an insert, never as an update of a key it would not find."""
    pg.sql("CREATE TABLE k (span interval PRIMARY KEY, v text)")
    dialect = capture_dialect_for(_url(pg), None, ["k"])
    apply_plan(dialect, plan_capture(dialect, "install", ["k"]), lambda _: None, False)
    pg.sql("INSERT INTO k VALUES ('1 mon', 'a')", "UPDATE k SET span = '30 days'")
    source = log_source_for(_url(pg), None, ["k"])
    try:
        read, _ = read_to_idle(source.reader.iter_changes(Position.of(0)))
    finally:
        source.reader.close()
    assert [show(c)[:4] for c in read] == [
        ("begin", 1),
        ("c", 1, "public.k", ("P1M",)),
        ("commit", 1),
        ("begin", 2),
        ("d", 2, "public.k", ("P1M",)),
        ("c", 2, "public.k", ("P30D",)),
        ("commit", 2),
    ]
