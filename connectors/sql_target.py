"""A database as a write target through SQLAlchemy Core: the engine (sessions in UTC), a
reflected table's names as the server stores them, and values as connectors read them
adapted to the target column's type -- shared by the re-sync's repair SQL and the
pipeline's database target.

Values arrive as the connectors read them (``merkle``'s logical-typed Python values, or a
log's) and are adapted to the target column's SQLAlchemy type: integers into booleans
(MariaDB keeps BOOLEAN as TINYINT(1), https://mariadb.com/kb/en/boolean/), microseconds or
durations into times, text into UUIDs. Sessions run in UTC, so timestamps written as UTC
wall clocks mean the same instant on every server.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Any

from connectors.model import RepairDialect
from connectors.registry import product_for, without_log_parameters

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import Engine


def build_engine(url: str, password: str | None, dialect: RepairDialect) -> Engine:
    """An engine for a database connection; its sessions read and write UTC timestamps."""
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    text, connect_args = without_log_parameters(url), dict[str, Any]()
    product = product_for(url)
    if product is not None and product.engine_arguments is not None:
        text, connect_args = product.engine_arguments.load()(text)
    parsed = make_url(text)  # SQLAlchemy's URL: the engine's own
    if password is not None:
        parsed = parsed.set(password=password)
    engine = sa.create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
    statement = dialect.utc_session
    if statement is not None:

        @sa.event.listens_for(engine, "connect")
        def _utc(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(statement)
            cursor.close()
            dbapi_connection.commit()

    return engine


def unescaped_backticks(table: sa.Table) -> sa.Table:
    """The table with its column names as the server stores them.

    SQLAlchemy's MySQL reflection reads names from ``SHOW CREATE TABLE`` and keeps a
    backtick of a name doubled, as the statement escapes it (seen with SQLAlchemy 2.1:
    column ``q`c`` reflects as ``q``c``); MySQL's identifier rules
    (https://mariadb.com/kb/en/identifier-names/) make the doubling the only escape.
    """
    import sqlalchemy as sa

    if not any("``" in column.name for column in table.columns):
        return table
    columns = [
        sa.Column(c.name.replace("``", "`"), c.type, primary_key=c.primary_key, nullable=c.nullable)
        for c in table.columns
    ]
    return sa.Table(table.name, sa.MetaData(), *columns, schema=table.schema)


def to_target_value(value: object, sa_type: Any, dialect: RepairDialect) -> object:
    """A connector's value adapted to the target column's type (module docstring)."""
    import sqlalchemy as sa

    if isinstance(sa_type, sa.Boolean) and isinstance(value, int):
        return bool(value)
    if isinstance(sa_type, sa.Integer) and isinstance(value, bool):
        return int(value)
    if isinstance(sa_type, sa.Time) and isinstance(value, dt.timedelta):
        value = value // dt.timedelta(microseconds=1)
    if isinstance(sa_type, sa.Time) and isinstance(value, int):
        return _time_of(value)
    if isinstance(sa_type, sa.Uuid) and isinstance(value, str) and sa_type.as_uuid:
        return uuid.UUID(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return _utc_datetime(value, sa_type, dialect)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


def _time_of(micros: int) -> dt.time | dt.timedelta:
    if 0 <= micros < 86_400_000_000:
        return (dt.datetime.min + dt.timedelta(microseconds=micros)).time()
    return dt.timedelta(microseconds=micros)  # MySQL TIME is a duration beyond a day


def _utc_datetime(value: dt.datetime, sa_type: Any, dialect: RepairDialect) -> dt.datetime:
    utc = value.astimezone(dt.UTC)
    # Drivers that drop the offset get UTC wall clocks: the session runs in UTC.
    keeps_zone = dialect.keeps_time_zone and getattr(sa_type, "timezone", False)
    return utc if keeps_zone else utc.replace(tzinfo=None)
