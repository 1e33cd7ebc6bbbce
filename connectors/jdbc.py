"""How Spark reads a source table over JDBC instead of through the Python drivers.

Spark's JDBC source reads partitions in the JVM, many times faster than Python drivers
parse rows, and hashing then stays in the JVM too. A connector that can describe such a
read (``Connector.jdbc_read``) gives a ``JdbcRead``: the driver, the URL, the statement that
puts each session in the partition's snapshot, and a SELECT whose every column travels in
a form the JDBC driver cannot reinterpret (numbers, text, bytes; times as exact integer
counts, never through ``java.sql`` time types and the JVM's time zone). ``Transport`` says
how the validator turns each column back into the type the Python readers produce, so both
paths give the same digests; a column with no exact transport makes the connector return
None and the table is read by the Python drivers. A value the Python reader would refuse
travels as a marker, and Spark fails the read with the reader's message (``Refusal``).

Positions travel in the rows: each row carries its partition snapshot's position
(``POSITION_COLUMN``), as the Python readers' batches do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType

from connectors.model import Partition

# Where Debian's libmariadb-java and libpostgresql-jdbc-java put their jars.
SYSTEM_JARS = Path("/usr/share/java")
# A raw copy of the partition column, selected under this name so that the partition
# predicates Spark puts around the query can use the key's index.
PARTITION_KEY = "_replcheck_partition_key"


class Transport(StrEnum):
    """How a column's values travel over JDBC."""

    AS_IS = "as_is"  # a number, text or bytes: cast to the column's type
    EPOCH_DAYS = "epoch_days"  # an integer count of days since 1970-01-01: a date
    EPOCH_MICROS = "epoch_micros"  # an integer count of microseconds: a timestamp or a time
    NONZERO = "nonzero"  # an integer: true when not zero


@dataclass(frozen=True, slots=True)
class Refusal:
    """A column's values the product's Python reader raises on, and the same error in Spark.

    The SELECT sends ``marker`` instead of such a value (no real count of its transport
    is that far from the epoch); Spark fails the read with ``before`` + the row's ``key``
    columns + ``after``, the key written as ``connectors.base.key_text`` writes it.
    """

    marker: int
    key: tuple[str, ...]
    before: str
    after: str


# The markers: the most negative int32 day count and int64 microsecond count.
REFUSED_MARKERS = MappingProxyType(
    {Transport.EPOCH_DAYS: -(2**31), Transport.EPOCH_MICROS: -(2**63)}
)


@dataclass(frozen=True, slots=True)
class JdbcDriver:
    """A product's JDBC driver: its class and the jar file it ships in."""

    class_name: str
    jar: str

    def system_jar(self) -> Path | None:
        """The jar where the system package installs it, if it is there."""
        path = SYSTEM_JARS / self.jar
        return path if path.exists() else None


@dataclass(frozen=True, slots=True)
class JdbcRead:
    """One table read over JDBC, partition by partition.

    Attributes:
        driver: The driver the read needs on Spark's classpath.
        url: The JDBC URL (no credentials).
        properties: Connection properties for Spark's JDBC source (user, password, fetch
            size, the statement that opens each partition's snapshot).
        query: SELECT of the columns (named as the table names them) and the position.
        transports: Per column, how its values travel.
        quote: Quotes an identifier for the partition predicates.
        refusals: Per column whose values the Python reader may refuse, how Spark refuses
            them alike.
    """

    driver: JdbcDriver
    url: str
    properties: Mapping[str, str]
    query: str
    transports: Mapping[str, Transport] = field(default_factory=lambda: MappingProxyType({}))
    quote: Callable[[str], str] = str
    refusals: Mapping[str, Refusal] = field(default_factory=lambda: MappingProxyType({}))

    def predicate(self, partition: Partition) -> str:
        """The WHERE text of a key-range partition, on ``PARTITION_KEY`` (``1 = 1`` for the
        whole table); the bounds are integers, written into the text."""
        if partition.key_columns:
            raise ValueError("JDBC reads cover key ranges, not key sets")
        where, params = replace(partition, column=PARTITION_KEY).predicate(self.quote, "{}")
        # A partition open at both ends (one partition for a small table) has no bounds:
        # Spark would send "WHERE " with nothing after it.
        if partition.column is None or not where:
            return "1 = 1"
        return where.removeprefix(" WHERE ").format(*(int(p) for p in params))
