"""How a live database target is fed (a comparison's ``replication:``), and confirming its
differences accordingly (DESIGN.md, "Live targets at an agreed position").

- ``replcheck``: a replcheck pipeline writes the target; its progress table in the target
  says which source position it applied. Differences are confirmed at an agreed position
  (``recheck.confirm_at_position``): no sleep, exact.
- ``mariadb``: a MariaDB replica of the source: the source's GTID position
  (``@@gtid_binlog_pos``) is waited for on the replica (``MASTER_GTID_WAIT``), then as above.
- ``mysql``: a MySQL replica of the source: the source's GTID set (``@@gtid_executed``) is
  waited for on the replica (``WAIT_FOR_EXECUTED_GTID_SET``), then as above.
- ``postgres``: a PostgreSQL logical subscriber or physical standby of the source: the
  source's WAL position (where its commits so far end, flushed) is waited for on it
  (``connectors.postgres.replica``), then as above.
- ``none``: nothing feeds the target while it is read: a difference is drift, no re-check.
- ``unknown`` (the default): detected where the target shows it (``detect``: replcheck
  progress rows for the table, a MariaDB or MySQL replica, a PostgreSQL standby or
  subscriber), else
  re-check after ``validation.recheck_lag_s`` (``recheck.confirm``).

A target that does not reach the position within ``validation.replica_wait_timeout_s`` is
an error naming the target, the position it applied and the one needed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from cdc_core.config import ConnectionConfig
from cdc_core.errors import ConfigError
from merkle.layout import RowLayout
from validator.config import ComparisonConfig, ValidationSettings
from validator.positions import Waited, wait_for_position
from validator.recheck import LiveTable, can_recheck, confirm, confirm_at_position
from validator.result import ComparisonResult

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

log = logging.getLogger(__name__)
ConnectorT = TypeVar("ConnectorT")


def confirm_live(
    result: ComparisonResult,
    comparison: ComparisonConfig,
    settings: ValidationSettings,
    layout: RowLayout,
    sides: tuple[LiveTable, LiveTable],
    target_connection: ConnectionConfig,
) -> ComparisonResult:
    """``result`` with the live target's in-flight differences set apart, as its
    ``replication`` says (``unknown``: as the target shows it is fed, if it does)."""
    kind = comparison.replication
    if kind == "unknown":
        kind = detect(sides, target_connection)
    if kind == "none":
        return result  # nothing in flight: every difference is drift
    if not can_recheck(layout):
        log.warning("comparison %s: differences not re-checked (key types)", result.name)
        return result
    timeout = settings.replica_wait_timeout_s
    if kind == "replcheck":
        return _confirm_on_pipeline(result, layout, sides, target_connection, timeout)
    if kind in ("mariadb", "mysql"):
        return _confirm_on_replica(result, layout, sides, timeout, kind)
    if kind == "postgres":
        return _confirm_on_subscriber(result, layout, sides, timeout)
    lag = settings.recheck_lag_s
    if lag <= 0:
        log.warning("comparison %s: differences not re-checked (lag %s s)", result.name, lag)
        return result
    return confirm(result, layout, *sides, lag)


def detect(sides: tuple[LiveTable, LiveTable], target_connection: ConnectionConfig) -> str:
    """How the target shows it is fed: a replcheck pipeline's progress rows for the table,
    a MariaDB or MySQL replica's replication status, a PostgreSQL standby or subscription; else
    ``unknown`` (also for other products, and when the target does not let us look)."""
    from connectors.registry import product_for

    source, target = sides
    product = product_for(target.connector.url)
    if product is None or product.replica_check is None:
        return "unknown"  # only products whose replication we know are looked into
    try:
        if _pipeline_feeds(target_connection, source.schema.table):
            return "replcheck"
        # ``replication: mariadb`` (``mysql``, ``postgres``): a replica of a source of the
        # same product, by that product's own replication
        if product_for(source.connector.url) is not product:
            return "unknown"
        replicates = product.replica_check.load()
        return replicates(target.connector, source.connector) or "unknown"
    except Exception as exc:  # best effort: a target we cannot look into stays unknown
        name, failure = target_connection.name, type(exc).__name__
        log.info("how %s is fed is not known (%s): re-check after the lag", name, failure)
    return "unknown"


def _pipeline_feeds(connection: ConnectionConfig, table: str) -> bool:
    """Whether a replcheck pipeline's progress rows in the target cover ``table``."""
    reached, engine = _applied_position(connection, table, refuse=False)
    try:
        return reached() is not None
    finally:
        engine.dispose()


def _confirm_on_pipeline(
    result: ComparisonResult,
    layout: RowLayout,
    sides: tuple[LiveTable, LiveTable],
    target_connection: ConnectionConfig,
    timeout_s: float,
) -> ComparisonResult:
    """``replication: replcheck``: the source's log end, waited for in the progress table."""
    source, _ = sides
    reached, engine = _applied_position(target_connection, source.schema.table)
    waited = Waited(
        f"target {target_connection.name} (its replcheck pipeline)",
        "applied position",
        "check that the pipeline writing it runs, or raise validation.replica_wait_timeout_s",
        "its pipeline must be running",
        {"target": target_connection.name, "table": source.schema.table},
        source.connector.describe_position,
    )

    def wait(position: int) -> int:
        return wait_for_position(reached, position, timeout_s, waited, poll_s=0.2)

    try:
        spell = source.connector.describe_position
        return confirm_at_position(
            result, layout, *sides, source.connector.log_position, wait, spell
        )
    finally:
        engine.dispose()


def _confirm_on_replica(
    result: ComparisonResult,
    layout: RowLayout,
    sides: tuple[LiveTable, LiveTable],
    timeout_s: float,
    kind: str = "mariadb",
) -> ComparisonResult:
    """``replication: mariadb`` or ``mysql``: the source's GTID position, waited for on the
    replica (``connectors.mariadb.replica.GTID_WAITS``)."""
    from connectors.mariadb.connector import MariaDBConnector
    from connectors.mariadb.replica import GTID_WAITS

    gtid = GTID_WAITS[kind]
    source, replica = _of_product(result, sides, MariaDBConnector, kind, gtid.product)
    return confirm_at_position(
        result,
        layout,
        *sides,
        lambda: gtid.position(source),
        lambda position: gtid.wait(replica, position, timeout_s),
    )


def _confirm_on_subscriber(
    result: ComparisonResult,
    layout: RowLayout,
    sides: tuple[LiveTable, LiveTable],
    timeout_s: float,
) -> ComparisonResult:
    """``replication: postgres``: the source's WAL position, waited for on the subscriber or
    standby (``connectors.postgres.replica``)."""
    from connectors.postgres.connector import PostgresConnector
    from connectors.postgres.replica import applied_position

    source, replica = _of_product(result, sides, PostgresConnector, "postgres", "PostgreSQL")
    waited = Waited(
        f"replica {replica.where}",
        "applied position",
        "check its subscription (pg_stat_subscription, the source's slot) or standby, or raise"
        " validation.replica_wait_timeout_s",
        "its replication must be running",
        {"replica": replica.where},
        source.describe_position,
    )

    def wait(position: int) -> int:
        reached = partial(applied_position, source, replica)
        return wait_for_position(reached, position, timeout_s, waited, poll_s=0.2)

    return confirm_at_position(
        result, layout, *sides, source.log_position, wait, source.describe_position
    )


def _of_product(
    result: ComparisonResult,
    sides: tuple[LiveTable, LiveTable],
    kind: type[ConnectorT],
    replication: str,
    product: str,
) -> tuple[ConnectorT, ConnectorT]:
    """Both sides' connectors, which ``replication`` needs of one product."""
    source, target = (side.connector for side in sides)
    if not (isinstance(source, kind) and isinstance(target, kind)):
        raise ConfigError(
            f"comparison {result.name}: replication: {replication} needs a {product} source and"
            " target; use replcheck, none or unknown",
            {"comparison": result.name},
        )
    return source, target


def _applied_position(
    connection: ConnectionConfig, table: str, refuse: bool = True
) -> tuple[Callable[[], int | None], Engine]:
    """Reads the lowest position the pipelines writing ``table`` into the target applied
    (None when none does and not ``refuse``), and the engine it reads with (dispose it).

    Raises:
        ConfigError: No replcheck pipeline writes ``table`` there (with ``refuse``).
    """
    import sqlalchemy as sa

    from connectors.database_target.progress import PROGRESS_TABLE, pipelines_covering
    from connectors.registry import connector_for
    from connectors.sql_target import build_engine

    assert connection.url is not None
    password = connection.password.reveal() if connection.password else None
    engine = build_engine(connection.url, password, connector_for(connection.url).repair)

    def reached() -> int | None:
        with engine.connect() as conn:
            if not sa.inspect(conn).has_table(PROGRESS_TABLE):
                found = {}
            else:
                found = pipelines_covering(conn, None, table)
        if not found and not refuse:
            return None
        if not found:
            raise ConfigError(
                f"replication: replcheck, but no replcheck pipeline writes source table {table}"
                f" into {connection.display()} (no row in its {PROGRESS_TABLE}); check the"
                " comparison's replication setting",
                {"table": table},
            )
        return min(position.value for position in found.values())

    return reached, engine
