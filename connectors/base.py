"""What every connector provides, and the registry that finds one by URL scheme.

A connector lives in ``connectors/<product>/`` and registers a ``Connector`` under the
SQLAlchemy URL schemes it serves (``mysql``, ``mariadb``, ``postgresql``, ``duckdb`` ...),
like sqlglot's dialects. The core asks a connector's ``Capabilities``, never its class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from cdc_core.errors import ConfigError, TerminalError
from connectors.model import (
    Capabilities,
    Partition,
    RepairDialect,
    Snapshot,
    TableSchema,
)
from merkle.options import TimeRounding
from merkle.types import LogicalType

if TYPE_CHECKING:
    import pyarrow as pa

    from connectors.jdbc import JdbcRead
    from connectors.pushdown import DigestDialect, DigestSession


class Connector(ABC):
    """Product-specific access for snapshots (log readers come with the CDC connectors)."""

    name: ClassVar[str]
    schemes: ClassVar[tuple[str, ...]]
    capabilities: ClassVar[Capabilities]
    repair: ClassVar[RepairDialect] = RepairDialect()  # how repair SQL talks to it

    def __init__(self, url: str, password: str | None = None) -> None:
        self.url = url
        self.password = password

    @abstractmethod
    def reflect(self, table: str) -> TableSchema:
        """Columns, logical types and primary key of ``table``; TerminalError if missing."""

    @abstractmethod
    def key_range(self, table: str, column: str) -> tuple[int, int] | None:
        """Min and max of an integer column (None for an empty table)."""

    @abstractmethod
    def arrow_schema(self, table: TableSchema, columns: Sequence[str]) -> pa.Schema:
        """The Arrow schema ``read_partition`` yields: ``columns``, then ``POSITION_COLUMN``."""

    @abstractmethod
    def read_partition(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        snapshot: Snapshot | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Rows of one partition as Arrow batches typed by ``merkle``'s logical types, read
        in ``snapshot`` when given, else in a consistent snapshot of the partition's own."""

    def timestamp_rounding(self) -> TimeRounding | None:
        """How this server rounds stored times (a product may refine its capability)."""
        return self.capabilities.timestamp_rounding

    def log_position(self) -> int | None:
        """The end of the source's log now (DESIGN "Positions"): every transaction
        committed so far is at or before it. None: the product has no log to wait on."""
        return None

    def describe_position(self, value: int) -> str:
        """How every command spells ``value``, a position of this product's log: each
        product's ``position.py`` has the one function that does (its decimal value for a
        product without another spelling)."""
        return str(value)

    @contextmanager
    def shared_snapshot(self, at_log_position: bool = True) -> Iterator[Snapshot | None]:
        """Hold a snapshot all partitions can read in (None: the product cannot share one).

        Args:
            at_log_position: The snapshot must sit at an exact log position (a copy fed
                from the log is read as of it); False lets a product take a cheaper
                snapshot whose position may be None.
        """
        yield None

    def jdbc_read(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition_column: str | None = None,
        snapshot: Snapshot | None = None,
    ) -> JdbcRead | None:
        """How Spark reads ``columns`` of ``table`` over JDBC (``connectors.jdbc``), key ranges
        of ``partition_column`` in parallel, in ``snapshot`` when the product shares one;
        None when this product or a column cannot be read so."""
        return None

    def digest_dialect(self) -> DigestDialect | None:
        """SQL for computing leaf digests in this server (``connectors.pushdown``), or None
        when the product or this server's version cannot."""
        return None

    def digest_session(
        self, table: TableSchema, snapshot: Snapshot | None
    ) -> AbstractContextManager[DigestSession]:
        """A connection every phase of a database-engine comparison reads on: inside
        ``snapshot`` when given, else in a consistent snapshot (or transaction) of its own."""
        raise TerminalError(f"the {self.name} connector computes no leaf digests")


def file_path(url: str, scheme: str, product: str, example: str) -> str:
    """The file of an embedded database URL (``<scheme>:///path``), or a ConfigError."""
    prefix = f"{scheme}:///"
    if not url.startswith(prefix):
        raise ConfigError(f"a {product} URL looks like {scheme}:///{example}, not {url}")
    return url[len(prefix) :]


def missing_table(table: str, where: str) -> TerminalError:
    """The error for a table that does not exist."""
    return TerminalError(f"table {table!r} not found in {where}; check the comparison's table")


def key_text(names: Sequence[str], values: Sequence[object]) -> str:
    """How an error shows a row's key: ``id=7, region=eu`` (NULL as ``NULL``). Spark
    writes the same text for keys read over JDBC (``validator.engines.spark.jdbc_source``)."""
    shown = ("NULL" if value is None else str(value) for value in values)
    return ", ".join(f"{name}={value}" for name, value in zip(names, shown, strict=True))


def arrow_type_of(ltype: LogicalType) -> Any:
    """The Arrow type a reader produces for a logical type (Spark maps it as merkle.spark
    expects: timestamps without zone become TIMESTAMP_NTZ, times are int64 microseconds)."""
    import pyarrow as pa

    from merkle import types as lt

    if isinstance(ltype, lt.DecimalType):
        if ltype.precision is None:  # unconstrained: the widest scale Spark can still hash
            return pa.decimal128(38, 18)
        return pa.decimal128(min(ltype.precision, 38), min(ltype.scale or 0, 38))
    if isinstance(ltype, lt.FloatType):
        return pa.float32() if ltype.bits == 32 else pa.float64()
    simple = {
        lt.IntegerType: pa.int64(),
        lt.StringType: pa.string(),
        lt.BytesType: pa.binary(),
        lt.BooleanType: pa.bool_(),
        lt.DateType: pa.date32(),
        lt.TimeType: pa.int64(),
        lt.TimestampType: pa.timestamp("us"),
        lt.TimestampTzType: pa.timestamp("us", tz="UTC"),
        lt.JsonType: pa.string(),
        lt.UuidType: pa.string(),
        lt.IntervalType: pa.duration("us"),
    }
    return simple[type(ltype)]
