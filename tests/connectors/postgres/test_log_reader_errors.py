"""Each set-up problem of a Postgres source is a clear error that names the fix: slot or
publication missing, a slot of another kind, WAL removed, no REPLICATION attribute,
wal_level below logical."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from cdc_core.capture.position import Position
from cdc_core.errors import TerminalError, TransientError
from connectors.postgres.errors import (
    LogicalDecodingSetupError,
    PublicationMissingError,
    SlotMismatchError,
    SlotMissingError,
    WalRemovedError,
)
from connectors.postgres.log_reader import PostgresLogReader
from connectors.postgres.source_config import PostgresSourceConfig
from tests.connectors.postgres.helpers import PgCase, read_until_end
from tests.private_servers import _PostgresProcess, _start_on_free_port

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def _first(reader: PostgresLogReader, start: Position | None = None) -> None:
    with contextlib.closing(reader.iter_changes(start)) as iterator:
        next(iterator)


def test_missing_slot_is_not_created_when_told_not_to(case: PgCase) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY)")
    with pytest.raises(SlotMissingError, match=r"pg_create_logical_replication_slot\('nope'"):
        _first(case.reader("t", slot="nope", create_slot=False))


def test_slot_dropped_under_a_pipeline_is_not_silently_recreated(case: PgCase) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY)")
    reader = case.reader("t")
    assert read_until_end(reader, None) == []
    start = reader.end_position()
    case.sql("SELECT pg_drop_replication_slot('replcheck')", "INSERT INTO t VALUES (1)")
    with pytest.raises(SlotMissingError, match="take a new initial snapshot"):
        _first(reader, start)


def test_missing_publication_and_unpublished_tables(case: PgCase) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY)", "CREATE TABLE u (id int PRIMARY KEY)")
    with pytest.raises(PublicationMissingError, match="CREATE PUBLICATION pub FOR TABLE"):
        _first(case.reader("t", publication="pub", create_publication=False))
    case.sql("CREATE PUBLICATION pub FOR TABLE t")
    with pytest.raises(PublicationMissingError, match=r"ALTER PUBLICATION pub ADD TABLE public\.u"):
        _first(case.reader("t", "u", publication="pub"))


def test_a_publication_with_a_column_list_is_refused_by_name(case: PgCase) -> None:
    """Columns a publication's column list leaves out would never follow (and generated
    columns reading them could not be computed): the start names the tables and the fix."""
    case.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v int, s text)",
        "CREATE PUBLICATION pub FOR TABLE t (id, v)",
    )
    with pytest.raises(PublicationMissingError, match=r"only some columns .*public\.t"):
        _first(case.reader("t", publication="pub"))


def test_slot_of_another_plugin(case: PgCase) -> None:
    case.sql(
        "CREATE TABLE t (id int PRIMARY KEY)",
        "SELECT pg_create_logical_replication_slot('other', 'test_decoding')",
    )
    with pytest.raises(SlotMismatchError, match="uses the plugin test_decoding, not pgoutput"):
        _first(case.reader("t", slot="other"))


@pytest.fixture
def small_wal_keep(case: PgCase) -> Iterator[None]:
    case.sql("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'", "SELECT pg_reload_conf()")
    try:
        yield
    finally:
        case.sql("ALTER SYSTEM RESET max_slot_wal_keep_size", "SELECT pg_reload_conf()")


def test_removed_wal_is_reported_with_the_fix(case: PgCase, small_wal_keep: None) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)")
    reader = case.reader("t")
    assert read_until_end(reader, None) == []  # the slot exists and holds WAL from here
    for round_ in range(4):  # more WAL than the slot may keep, then a checkpoint drops it
        case.sql(
            f"INSERT INTO t SELECT g, repeat('x', 500) FROM generate_series({round_ * 1000},"
            f" {round_ * 1000 + 999}) AS g",
            "SELECT pg_switch_wal()",
        )
    case.sql("CHECKPOINT")
    with pytest.raises(WalRemovedError, match="take a new initial snapshot") as raised:
        _first(reader)
    assert raised.value.context["slot"] == "replcheck"


@pytest.fixture
def role_without_replication(case: PgCase) -> Iterator[str]:
    role = f"reader_{case.database}"  # roles belong to the cluster: a unique name
    case.sql(f"CREATE ROLE {role} LOGIN", f"GRANT ALL ON SCHEMA public TO {role}")
    try:
        yield role
    finally:
        case.sql(f"DROP OWNED BY {role}", f"DROP ROLE {role}")


def test_user_without_replication_gets_the_fix(case: PgCase, role_without_replication: str) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY)", "CREATE PUBLICATION replcheck FOR TABLE t")
    case.sql(
        f"GRANT SELECT ON t TO {role_without_replication}",
        "SELECT pg_create_logical_replication_slot('replcheck', 'pgoutput')",
    )
    url = case.server.url(case.database).replace("//postgres@", f"//{role_without_replication}@")
    reader = PostgresLogReader(PostgresSourceConfig(url, ("t",)))
    with pytest.raises(TerminalError, match=r"ALTER ROLE <user> REPLICATION"):
        _first(reader)


class _ReplicaWalProcess(_PostgresProcess):
    """A private cluster like the shared one, but with wal_level=replica."""

    def _argv(self) -> list[str]:
        return [a.replace("wal_level=logical", "wal_level=replica") for a in super()._argv()]


def test_wal_level_below_logical_gets_the_fix() -> None:
    process = _start_on_free_port(_ReplicaWalProcess)
    assert isinstance(process, _ReplicaWalProcess)
    try:
        url = process.handle().url("test")
        with pytest.raises(LogicalDecodingSetupError, match="set wal_level = logical"):
            _first(PostgresLogReader(PostgresSourceConfig(url, ("t",))))
    finally:
        process.stop()


def test_slot_in_use_by_another_reader(case: PgCase, monkeypatch: pytest.MonkeyPatch) -> None:
    import connectors.postgres.log_reader as log_reader

    monkeypatch.setattr(log_reader, "SLOT_RELEASE_S", 0.5)  # waits this long for a release
    case.sql("CREATE TABLE t (id int PRIMARY KEY)")
    holder = case.reader("t")
    with contextlib.closing(holder.iter_changes(None)) as holding:
        next(holding)  # streaming: the slot is active
        start = holder.end_position()
        with pytest.raises(
            TransientError, match=r"in use by another process \(.*is active for PID"
        ):
            _first(case.reader("t"), start)
