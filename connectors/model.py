"""The value types every connector file uses: what a table looks like, a slice of it, a
snapshot's identity, a product's capabilities and what a log source hands the pipeline
(below the ``Connector`` ABC and the registry, so product files and the JDBC and pushdown
helpers import these without importing each other)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cdc_core.capture.position import Position
from cdc_core.capture.source import KeyShapeError, LogReader, RefusedColumn, SnapshotReader
from cdc_core.errors import ContractError
from cdc_core.rebuild.full_width import FetchMissing, FetchUnavailable
from merkle.options import TimeRounding
from merkle.types import LogicalType, TimeType


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Facts about a product the core plans by."""

    # How the product reduces a finer time it is given to a column's precision (measured,
    # see the product's types.py); None: unknown, or the product never rounds.
    timestamp_rounding: TimeRounding | None = None


@dataclass(frozen=True, slots=True)
class SourceColumn:
    """A column as the product declares it, and the logical type it is hashed as."""

    name: str
    native_type: str
    ltype: LogicalType | None  # None: no logical type (reported as a schema difference)
    nullable: bool = True
    # The character set a text column stores its characters in, where the product declares
    # one per column (MariaDB); None: not text, or not known.
    charset: str | None = None


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A reflected table: its columns in order and its primary key (possibly empty)."""

    table: str
    columns: tuple[SourceColumn, ...]
    primary_key: tuple[str, ...]

    def column(self, name: str) -> SourceColumn:
        """The column called ``name``."""
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)


NO_LOGICAL_TYPE = "no logical type in replcheck (nothing carries or compares such values)"

Refusal = Callable[[SourceColumn], str | None]
"""Why a pipeline cannot carry a column (``RefusedColumn.reason``); None: it can."""


def without_logical_type(column: SourceColumn) -> str | None:
    """The refusal every product shares: a column with no logical type (spatial, ranges,
    network types, XMLTYPE, ...) cannot be hashed, so nothing can show it arrived intact."""
    return NO_LOGICAL_TYPE if column.ltype is None else None


def carried_columns(
    schema: TableSchema, refusal: Refusal = without_logical_type
) -> tuple[list[str], tuple[RefusedColumn, ...]]:
    """The columns of ``schema`` a pipeline carries, in order, and those it refuses (never
    left out in silence: ``cdc_core.ddl.descriptions`` refuses the table unless they are
    ignored).

    Args:
        schema: The table as the connector reflected it.
        refusal: The product's reasons (it should include ``without_logical_type``'s).
    """
    carried: list[str] = []
    refused: list[RefusedColumn] = []
    for column in schema.columns:
        reason = refusal(column)
        if reason is None:
            carried.append(column.name)
        else:
            refused.append(RefusedColumn(column.name, column.native_type, reason))
    return carried, tuple(refused)


POSITION_COLUMN = "_source_pos"
"""Every batch a connector reads carries the log position of the snapshot it was read in
(int64; NULL for products without a log), so each partition can be compared with the
target at its own position."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A consistent read view parallel readers can share, and the log position it sees.

    ``token`` is product-specific (a PostgreSQL exported snapshot name); a connector whose
    snapshots cannot be shared yields None from ``shared_snapshot`` and each partition
    opens its own snapshot and reports its own position. ``position`` is None when the
    snapshot was taken without an exact log position (none was asked for). ``mechanism``
    names how it was taken, for progress lines.
    """

    position: int | None
    position_text: str | None
    token: str | None
    mechanism: str = "a shared snapshot"


@dataclass(frozen=True, slots=True)
class Partition:
    """A slice of a table one read covers: ``column`` in ``[low, high)``, the rows whose
    ``key_columns`` equal one of ``keys``, or (neither given) all rows.

    A missing bound is open: the first and last partitions of a plan are open-ended, so
    rows inserted beyond the key range seen when planning are still read by someone.
    """

    index: int
    column: str | None = None
    low: int | None = None
    high: int | None = None
    key_columns: tuple[str, ...] = ()
    keys: tuple[tuple[object, ...], ...] = ()

    def __post_init__(self) -> None:
        width = len(self.key_columns)
        if any(len(key) != width for key in self.keys):
            widths = sorted({len(key) for key in self.keys} - {width})
            raise KeyShapeError(
                f"keys of {widths} values asked of a key of {width} columns {self.key_columns}"
            )

    def predicate(
        self,
        quote: Callable[[str], str],
        placeholder: str,
        adapt: Callable[[str, object], object] | None = None,
    ) -> tuple[str, list[Any]]:
        """``WHERE`` text (empty for the whole table) and its parameters, in the driver's
        ``placeholder`` style (``%s`` or ``?``); ``adapt`` turns a key value of a column, as
        the lake holds it, into the parameter the source compares the column with
        (``key_parameter``)."""
        if self.key_columns:
            return self._key_predicate(quote, placeholder, adapt or _as_held)
        if self.column is None:
            return "", []
        terms, params = [], []
        column = quote(self.column)
        if self.low is not None:
            terms.append(f"{column} >= {placeholder}")
            params.append(self.low)
        if self.high is not None:
            # The partition open below also holds NULLs, which no range comparison matches.
            below = f"{column} < {placeholder}"
            terms.append(below if self.low is not None else f"({below} OR {column} IS NULL)")
            params.append(self.high)
        return (f" WHERE {' AND '.join(terms)}" if terms else ""), params

    def _key_predicate(
        self,
        quote: Callable[[str], str],
        placeholder: str,
        adapt: Callable[[str, object], object],
    ) -> tuple[str, list[Any]]:
        if not self.keys:
            return " WHERE 1 = 0", []
        width = len(self.key_columns)
        quoted = [quote(c) for c in self.key_columns]
        plain = [key for key in self.keys if None not in key]
        terms: list[str] = []
        if plain:
            one = "(" + ", ".join([placeholder] * width) + ")"
            target = f"({', '.join(quoted)})" if width > 1 else quoted[0]
            terms.append(
                f"{target} IN ({', '.join([one if width > 1 else placeholder] * len(plain))})"
            )
        columns = self.key_columns
        params = [adapt(c, v) for key in plain for c, v in zip(columns, key, strict=True)]
        # A NULL part never equals (a whole-row key of a table without a key may hold one).
        for key in (key for key in self.keys if None in key):
            parts = [
                f"{column} IS NULL" if value is None else f"{column} = {placeholder}"
                for column, value in zip(quoted, key, strict=True)
            ]
            terms.append(f"({' AND '.join(parts)})")
            params += [adapt(c, v) for c, v in zip(columns, key, strict=True) if v is not None]
        return f" WHERE {' OR '.join(terms)}", params


def _as_held(column: str, value: object) -> object:
    return value


def key_parameter(ltype: LogicalType | None, value: object) -> object:
    """A key value as the lake holds it, as a parameter the source compares its column
    with: a TIME, held as signed microseconds, goes as its text (``-838:59:59.000000``,
    ``24:00:00.000000``), which MariaDB and PostgreSQL both convert to the column's type.
    Other values go as they are."""
    if not isinstance(ltype, TimeType) or not isinstance(value, int):
        return value
    seconds, micros = divmod(abs(value), 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    sign = "-" if value < 0 else ""
    return f"{sign}{hours:02d}:{minute:02d}:{second:02d}.{micros:06d}"


@dataclass(frozen=True, slots=True)
class LogSource:
    """A source's log reader, its snapshot reader (if it has one) and its tables.

    ``captured`` names the tables asked for as the log names them (a plain name qualified
    with the source's default schema), so the pipeline's filter matches its changes;
    ``fetch_missing`` is the hook completing columns the log leaves out, for every table
    (``PipelineConfig.fetch_missing``: tables created while running too), for products whose
    log can omit them;
    ``fetch_unavailable``, per table, the hook reading new values the log cannot render as
    of their commit (``RebuildConfig.fetch_unavailable_by_table``).
    """

    reader: LogReader
    snapshots: SnapshotReader | None
    tables: Callable[[], list[str]]  # every table the source has now (schema.table)
    captured: tuple[str, ...] = ()  # the pipeline's tables as its log names them
    fetch_missing: FetchMissing | None = None
    fetch_unavailable: Mapping[str, FetchUnavailable] = field(default_factory=dict)


LogSourceFactory = Callable[[str, "str | None", Sequence[str]], LogSource]
"""Builds a log source from a URL, a password and the tables to capture."""

QuietLog = Callable[[str, int, int], "str | None"]
"""``check(table, start, end)``: None when the source's log provably holds no committed
change (rows or DDL) of ``table`` at a position in ``(start, end]``, else why it cannot say
so (the change it found, or what kept it from reading the log)."""

QuietLogFactory = Callable[[str, "str | None"], QuietLog]
"""Builds a source's ``QuietLog`` from a pipeline's URL and password."""


def _standard_bytes(value: bytes) -> str:
    return f"X'{value.hex()}'"  # the SQL standard's binary string literal


@dataclass(frozen=True, slots=True)
class RepairDialect:
    """What repair SQL (``validator/resync/repair_sql.py``) must know of a target product.

    Attributes:
        utc_session: The statement making a session read and write timestamps as UTC wall
            clocks (None: the product has no session time zone).
        lock_wait: The statement limiting the transaction's lock waits to so many seconds
            (None: the product does not wait for row locks).
        locks_rows: Whether ``SELECT ... FOR UPDATE`` locks rows (single-writer products
            serialise by their write transaction instead).
        keeps_time_zone: Whether the driver stores an aware timestamp's offset (else values
            are passed as UTC wall clocks, the session being in UTC).
        doubled_backticks: Whether SQLAlchemy's reflection reports a backtick in a name as
            two (MySQL's ``SHOW CREATE TABLE``), to be undone.
        bytes_literal: A binary value as a literal of the review file.
        standard_strings: The statement making a backslash an ordinary character in string
            literals for the session, so a review file's literals (quotes doubled, nothing
            else escaped) mean the same whatever the server's setting (None: always so).
    """

    utc_session: str | None = None
    lock_wait: Callable[[float], str] | None = None
    locks_rows: bool = True
    keeps_time_zone: bool = False
    doubled_backticks: bool = False
    bytes_literal: Callable[[bytes], str] = _standard_bytes
    standard_strings: str | None = None


@dataclass(frozen=True, slots=True)
class LogStatus:
    """Where a source's log stands for one pipeline, read without disturbing it (each
    product's ``log_status.py``; ``replcheck cdc status``).

    Args:
        end: The log's end now: every transaction committed so far is at or before it.
        behind_bytes: Bytes of log between the target's position and ``end`` (None: the
            target holds nothing yet, or the product cannot count them).
        retention: How much log the source keeps for the pipeline, in one line.
        retained_bytes: Bytes of log the source keeps only for the pipeline (a PostgreSQL
            slot's; None: nothing is kept for it, or unknown).
        attention: Why the log's retention needs a person now (None: it does not).
        while_stopped: What a stopped pipeline costs the source, or risks (``cdc run``
            warns with it when it stops; None: nothing).
        reading: Whether the source sees the pipeline reading its log now (None: it
            cannot tell).
    """

    end: Position
    behind_bytes: int | None
    retention: str
    retained_bytes: int | None = None
    attention: str | None = None
    while_stopped: str | None = None
    reading: bool | None = None

    def __post_init__(self) -> None:
        for name in ("behind_bytes", "retained_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ContractError(f"LogStatus.{name} must be >= 0, not {value}")


LogStatusReader = Callable[[str, "str | None", "Position | None", "Position | None"], LogStatus]
"""``read(url, password, held, resume_at)``: the ``LogStatus`` of a pipeline's source URL
for a pipeline whose target holds everything up to ``held`` and that resumes reading the log
at ``resume_at`` (None: it has no position yet)."""
