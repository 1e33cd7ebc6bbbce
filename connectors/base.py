"""What every connector provides, and the one description of each product.

A product lives in ``connectors/<product>/``; its ``product.py`` holds its
``ProductDescription``: the URL schemes it serves (``mysql``, ``mariadb``, ``postgresql``,
``duckdb`` ...), its ``Connector`` and its log, capture and dialect parts, which
``connectors.registry`` finds by scheme, like sqlglot's dialects. The core asks a
connector's ``Capabilities`` or a product's description, never a connector's class.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from cdc_core.errors import ConfigError, ContractError, TerminalError
from connectors.model import (
    POSITION_COLUMN,
    Capabilities,
    LogSourceFactory,
    LogStatusReader,
    Partition,
    QuietLogFactory,
    RepairDialect,
    Snapshot,
    TableSchema,
)
from connectors.urls import DatabaseUrl, parse_url
from merkle.options import TimeRounding
from merkle.types import LogicalType

if TYPE_CHECKING:
    import pyarrow as pa

    from connectors.jdbc import JdbcDriver, JdbcRead
    from connectors.pushdown import DigestDialect, DigestSession
    from connectors.trigger_capture.dialect import TriggerDialect

    CaptureDialectFactory = Callable[[str, str | None, Sequence[str]], TriggerDialect]
    """Builds the trigger capture of some tables from a URL and password."""

    EngineArguments = Callable[[str], tuple[str, dict[str, Any]]]
    """``engine_arguments(url)``: ``url`` for SQLAlchemy without the parameters replcheck
    reads itself, and the driver's connect arguments they mean."""

    ReplicaCheck = Callable[["Connector", "Connector"], str | None]
    """``is_replica(server, of)``: the ``replication:`` kind by which ``server`` replicates
    ``of`` with the product's own replication (``mariadb`` or ``mysql``, ``postgres``), None
    when it does not (both connectors of the product whose description names the check)."""

T = TypeVar("T")


class Connector(ABC):
    """Product-specific access for snapshots (log readers come with the CDC connectors)."""

    name: ClassVar[str]
    schemes: ClassVar[tuple[str, ...]]
    capabilities: ClassVar[Capabilities]
    repair: ClassVar[RepairDialect] = RepairDialect()  # how repair SQL talks to it

    def __init__(
        self, url: str, password: str | None = None, endpoint: DatabaseUrl | None = None
    ) -> None:
        """``endpoint``: ``url`` already parsed (a log source's config has it), else the
        first read of ``endpoint`` parses ``url``."""
        self.url = url  # the text still builds SQLAlchemy engines and JDBC URLs
        self.password = password
        self._endpoint = endpoint

    @property
    def endpoint(self) -> DatabaseUrl:
        """The URL's parts, parsed once. On first use, not in ``__init__``: a bad URL fails
        where it did before, and a connector asked only for its ``repair`` or a file
        database's path never needs them."""
        if self._endpoint is None:
            self._endpoint = self.parse_endpoint(self.url)
        return self._endpoint

    @staticmethod
    def parse_endpoint(url: str) -> DatabaseUrl:
        """``url``'s parts (a product may word a bad URL's error its own way)."""
        return parse_url(url)

    @abstractmethod
    def reflect(self, table: str) -> TableSchema:
        """Columns, logical types and primary key of ``table``; TerminalError if missing."""

    @abstractmethod
    def key_range(self, table: str, column: str) -> tuple[int, int] | None:
        """Min and max of an integer column (None for an empty table)."""

    def arrow_schema(self, table: TableSchema, columns: Sequence[str]) -> pa.Schema:
        """The Arrow schema ``read_partition`` yields: ``columns``, then ``POSITION_COLUMN``."""
        import pyarrow as pa

        fields = [pa.field(name, self.arrow_type(table, name)) for name in columns]
        return pa.schema([*fields, pa.field(POSITION_COLUMN, pa.int64())])

    def arrow_type(self, table: TableSchema, name: str) -> pa.DataType:
        """The Arrow type column ``name`` is read as: its logical type's (``arrow_type_of``);
        a product overrides it for what it reads otherwise or refuses."""
        column = table.column(name)
        if column.ltype is None:
            raise TerminalError(f"column {name} ({column.native_type}) cannot be read")
        arrow_type: pa.DataType = arrow_type_of(column.ltype)
        return arrow_type

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

    def follow_lake(self, sources: Callable[[], Sequence[tuple[str | None, int]]]) -> None:
        """Number this source's log positions as the pipelines writing a lake table do.

        Args:
            sources: Reads, per pipeline writing the table, the server whose log it reads
                (None: not recorded) and the position it has reached. Only a product whose
                pipelines follow a failover to another server (MySQL) reads them.
        """
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
    writes the same text for keys read over JDBC (``validator.engines.sides.spark.jdbc_source``)."""
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


@dataclass(frozen=True, slots=True)
class Lazy(Generic[T]):
    """An attribute of a product's module, named ``"module:attribute"`` and imported only
    when used: a product's driver-bound modules load when that product is asked for, never
    when the registry is read (``connectors.registry``)."""

    reference: str

    def __post_init__(self) -> None:
        module, _, attribute = self.reference.partition(":")
        if not module.startswith("connectors.") or not attribute.isidentifier():
            raise ContractError(f"Lazy({self.reference!r}) must be 'connectors.module:name'")

    def load(self) -> T:
        """The attribute (importing its module the first time)."""
        module, _, attribute = self.reference.partition(":")
        return cast(T, getattr(importlib.import_module(module), attribute))


@dataclass(frozen=True, slots=True)
class ProductDescription:
    """One product as the core sees it: the one value in ``connectors/<product>/product.py``.

    Attributes:
        name: The product folder's name (``mariadb``), also its connector's ``name``.
        schemes: Every URL scheme the product serves (a ``+driver`` suffix is dropped).
        connector: Its snapshot reader (None: the product has no connector, e.g. synthetic).
        connector_schemes: The schemes its connector serves, where fewer than ``schemes``
            (None: all of them).
        repair: How repair SQL talks to it as a target (``connectors.model.RepairDialect``).
        log_source: Opens a pipeline's source over the product's log (None: no log reader).
        log_parameters: Which URL query parameters its log source takes (left out of the
            URL that other consumers hand to a driver).
        quiet_log: Reads its log between two positions without disturbing a pipeline.
        log_status: Reads its log's end and what it keeps for a pipeline.
        capture_dialect: Its trigger capture (``connectors.trigger_capture``).
        replica_check: Tells whether a server replicates another one of this product by the
            product's own replication, and by which ``replication:`` kind.
        jdbc_driver: The JDBC driver Spark reads it with.
        engine_arguments: The URL SQLAlchemy takes and the driver's connect arguments, for a
            URL with parameters replcheck reads itself (MariaDB's TLS; None: the URL as is).

    The SQL computing leaf digests in a server stays with the connector
    (``Connector.digest_dialect``): whether a server can run it depends on its version and
    flavour, not on the product alone.
    """

    name: str
    schemes: tuple[str, ...]
    connector: Lazy[type[Connector]] | None = None
    connector_schemes: tuple[str, ...] | None = None
    repair: RepairDialect = field(default_factory=RepairDialect)
    log_source: Lazy[LogSourceFactory] | None = None
    log_parameters: Lazy[Callable[[str], bool]] | None = None
    quiet_log: Lazy[QuietLogFactory] | None = None
    log_status: Lazy[LogStatusReader] | None = None
    capture_dialect: Lazy[CaptureDialectFactory] | None = None
    replica_check: Lazy[ReplicaCheck] | None = None
    jdbc_driver: Lazy[JdbcDriver] | None = None
    engine_arguments: Lazy[EngineArguments] | None = None

    def __post_init__(self) -> None:
        if not self.schemes or any(s != s.lower() or "+" in s for s in self.schemes):
            raise ContractError(f"product {self.name}: schemes must be lower-case, without +")
        if not set(self.connector_schemes or ()) <= set(self.schemes):
            raise ContractError(f"product {self.name}: connector_schemes outside its schemes")
        if self.log_source is None and (self.log_parameters or self.quiet_log or self.log_status):
            raise ContractError(f"product {self.name}: log parts without a log source")

    @property
    def served_by_connector(self) -> tuple[str, ...]:
        """The schemes its connector serves (none without a connector)."""
        if self.connector is None:
            return ()
        return self.connector_schemes or self.schemes

    @property
    def captures_by_trigger(self) -> bool:
        """Whether its URLs capture changes by triggers unless they say ``capture=log``: it
        has trigger capture and no log reader."""
        return self.log_source is None and self.capture_dialect is not None
