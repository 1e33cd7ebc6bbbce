"""Leaf digests computed inside the databases: the validator's ``database`` engine.

When both sides of a comparison are databases whose connectors can write the hash
contract's canonical bytes in SQL, each database computes its own leaf digests with one
GROUP BY over its table. Only digests, the keys and hashes of the rows in mismatched
leaves, and the differing rows themselves leave the servers: no Spark, no full read.

- **Hash.** Databases have no xxh64, so the row hash is ``merkle.hashing.md5_hash64`` of
  the contract's canonical row bytes (MD5 exists in every supported product). The bytes
  are the contract's own: each dialect is tested against the golden vectors.
- **Leaves.** ``RangeLeaves`` when the first key column is an integer: leaf ``i`` holds the
  keys in ``[low + i * width, low + (i + 1) * width)``. Every product orders integers
  alike, and a mismatched leaf is re-read by an index range scan. Keys beyond the planned
  range (inserted since) fall into the first or last leaf, NULL keys into the first.
  ``HashLeaves`` otherwise: the top ``depth`` bits of ``md5_hash64`` of the canonical key
  bytes, as the contract's leaves are for xxh64.
- **Digest.** ``(row count, sum of row hashes mod 2**64)`` per leaf, as ``merkle.tree``
  expects; a database sums exactly (DECIMAL/NUMERIC) and the caller reduces mod 2**64.

A product's dialect (``connectors/<product>/pushdown.py``) writes each payload, the field
framing and the hash; ``digest_sql`` and ``keyed_sql`` assemble the queries. Whatever a
dialect cannot write exactly (JSON, float_digits, case-insensitive strings, ...) raises
``NotPushable``, and the validator compares that table in Spark instead.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from connectors.model import Partition, SourceColumn
from merkle import types as lt
from merkle.options import ComparisonOptions, TimeRounding

if TYPE_CHECKING:
    import pyarrow as pa


class NotPushable(Exception):
    """The database engine cannot compare this exactly (a type, an option, a server)."""


@dataclass(frozen=True, slots=True)
class DigestColumn:
    """One compared column: as this side declares it, and the logical type it is hashed as."""

    column: SourceColumn
    ltype: lt.LogicalType

    @property
    def name(self) -> str:
        """The column's name on this side."""
        return self.column.name


@dataclass(frozen=True, slots=True)
class DigestTable:
    """What one side hashes: its table, the compared columns in layout order, the key
    columns (this side's names, in key order) and the comparison options."""

    table: str
    columns: tuple[DigestColumn, ...]
    key: tuple[str, ...]
    options: ComparisonOptions

    def __post_init__(self) -> None:
        names = {column.name for column in self.columns}
        if not self.key or not set(self.key) <= names:
            raise ValueError(f"key {self.key} must be among the compared columns {names}")


@dataclass(frozen=True, slots=True)
class Payload:
    """SQL of one column's payload; ``binary`` when it is bytes rather than text.

    ``null_when`` is SQL that is true exactly when the payload is NULL, cheaper to test than
    the payload itself (usually the column ``IS NULL``); ``""`` when it is never NULL; None
    when only testing the payload tells. ``refused_when`` is SQL that is true when the
    column holds a value without canonical bytes, which the connector's reader refuses
    (MariaDB's dates that are not calendar dates); ``""`` when it cannot hold one.
    ``length`` is SQL of the payload's byte length where the payload is not NULL, cheaper
    than measuring the payload (which computes it a second time where the dialect has no
    fence); ``""``: measure it. Like ``refused_when`` it reads the table's columns, so only
    unfenced dialects (MariaDB) use it.
    """

    sql: str
    binary: bool = False
    null_when: str | None = None
    refused_when: str = ""
    length: str = ""


@dataclass(frozen=True, slots=True)
class RangeLeaves:
    """``2**depth`` leaves of ``width`` consecutive integer keys each, from ``low``."""

    low: int
    width: int
    depth: int

    def __post_init__(self) -> None:
        if self.width < 1 or not 0 <= self.depth <= 30:
            raise ValueError(f"invalid range leaves (width {self.width}, depth {self.depth})")

    @property
    def count(self) -> int:
        """How many leaves there are."""
        return 1 << self.depth

    @property
    def high(self) -> int:
        """The largest key the last leaf was planned for."""
        return self.low + self.count * self.width - 1

    def bounds(self, first: int, stop: int) -> tuple[int | None, int | None]:
        """Key bounds ``[low, high)`` of leaves ``first..stop-1``; None where open (the first
        leaf also holds keys below ``low`` and NULL keys, the last those above)."""
        low = None if first == 0 else self.low + first * self.width
        high = None if stop >= self.count else self.low + stop * self.width
        return low, high


@dataclass(frozen=True, slots=True)
class HashLeaves:
    """``2**depth`` leaves by the top bits of the key's MD5 hash."""

    depth: int

    @property
    def count(self) -> int:
        """How many leaves there are."""
        return 1 << self.depth


LeafScheme = RangeLeaves | HashLeaves

Field = tuple[str, bool]
"""SQL of one framed field, and whether it is bytes (PostgreSQL keeps bytea apart from text)."""


class DigestSession(Protocol):
    """One connection of one side, inside the snapshot (or transaction) every phase of a
    comparison reads in, so digests, keys and rows all see the same data."""

    @property
    def position(self) -> int | None:
        """The log position the snapshot sees (None: no log, or a live target)."""

    def iter_rows(self, sql: str) -> Iterator[tuple[Any, ...]]:
        """Rows of a query the engine assembled (no parameters: it inlines integers only)."""

    def read_rows(self, columns: Sequence[str], partition: Partition) -> Iterator[pa.RecordBatch]:
        """Rows of ``partition`` (rows by key) as the connector's Arrow batches."""


PayloadWriter = Callable[[str, DigestColumn, ComparisonOptions, "DigestDialect"], Payload]
"""Writes one payload's SQL from the quoted column, the column, the options and the dialect."""


class DigestDialect(ABC):
    """A product's SQL for the pieces of the database engine."""

    # Appended to the subquery that computes the payloads, so the framing around it reads
    # each payload instead of computing it again (PostgreSQL: OFFSET 0 stops the planner
    # from pulling the subquery up); empty where subqueries are merged anyway (MariaDB).
    payload_fence: str = ""

    @abstractmethod
    def quote(self, name: str) -> str:
        """A quoted identifier."""

    @abstractmethod
    def table(self, name: str) -> str:
        """The quoted, qualified name of a table as the connector names it."""

    product: ClassVar[str]
    # Per compared logical type, the function writing a payload's SQL (or NotPushable).
    writers: ClassVar[Sequence[tuple[type, PayloadWriter]]] = ()

    def payload(self, column: DigestColumn, options: ComparisonOptions) -> Payload:
        """SQL of the canonical payload of ``column`` (NULL where the field is NULL).

        Raises:
            NotPushable: this product cannot write the payload exactly.
        """
        for kind, write in self.writers:
            if isinstance(column.ltype, kind):
                return write(self.quote(column.name), column, options, self)
        raise NotPushable(f"column {column.name}: {column.ltype} is not computed in {self.product}")

    @abstractmethod
    def field(self, ref: str, payload: Payload) -> str:
        """The framed field ``<length>:<payload>`` (or ``N``) of the payload ``ref`` (its SQL,
        or the name it was selected as), as one or more comma-separated arguments of the
        dialect's string concatenation (``key_bytes``), so a row is concatenated at once."""

    @abstractmethod
    def hash64(self, fields: Sequence[Field]) -> str:
        """SQL of ``md5_hash64`` of the concatenated fields: any integer congruent to it
        mod 2**64."""

    @abstractmethod
    def hash_leaf(self, fields: Sequence[Field], depth: int) -> str:
        """SQL of the top ``depth`` bits (0 < depth <= 32) of ``md5_hash64`` of the
        concatenated key fields, as a non-negative integer."""

    @abstractmethod
    def key_bytes(self, fields: Sequence[Field]) -> str:
        """SQL of the canonical key bytes (the concatenated key fields), text or bytes."""

    @abstractmethod
    def int_div(self, dividend: str, divisor: int) -> str:
        """SQL of the integer quotient of a non-negative ``dividend``."""

    def reduce_micros(self, micros: str, digits: int, rounding: TimeRounding, epoch: int) -> str:
        """``merkle.canonical.reduce_micros`` in SQL (``micros`` an exact integer expression)."""
        unit = 10 ** (6 - digits)
        if unit == 1:
            return micros
        half = unit // 2

        def floor_to(value: str) -> str:
            # MOD keeps the dividend's sign in every supported product: add a unit and take
            # it again to floor below zero too.
            return f"({value} - MOD(MOD({value}, {unit}) + {unit}, {unit}))"

        if rounding is TimeRounding.ROUND:
            return floor_to(f"({micros} + {half})")
        if rounding is TimeRounding.TRUNCATE:
            return floor_to(micros)
        offset = f"({micros} - {epoch})"
        magnitude = floor_to(f"(ABS({offset}) + {half})")
        return f"({epoch} + CASE WHEN {offset} >= 0 THEN {magnitude} ELSE -{magnitude} END)"


def check_options(options: ComparisonOptions) -> None:
    """Options no dialect writes in SQL exactly as Python and Spark do."""
    if options.float_digits is not None:
        raise NotPushable("float_digits rounds with IEEE steps databases do not reproduce")
    if options.case_insensitive:
        raise NotPushable("case_insensitive: databases lower-case Unicode by their own rules")


@dataclass(frozen=True, slots=True)
class _Query:
    """The parts every query of one side shares.

    With a payload fence (PostgreSQL) the payloads ``p<i>`` and raw keys ``k<j>`` are
    selected in a subquery and framed above it, so each payload is computed once. Without
    one (MariaDB merges derived tables anyway) everything is written over the table itself.
    """

    dialect: DigestDialect
    table: DigestTable
    scheme: LeafScheme

    def payloads(self) -> list[Payload]:
        check_options(self.table.options)
        return [self.dialect.payload(c, self.table.options) for c in self.table.columns]

    @property
    def fenced(self) -> bool:
        return bool(self.dialect.payload_fence)

    def key_ref(self, index: int) -> str:
        return f"k{index}" if self.fenced else self.dialect.quote(self.table.key[index])

    def source(self, where: str) -> str:
        """The FROM clause: the payload subquery, or the table with its WHERE."""
        q = self.dialect.quote
        clause = f" WHERE {where}" if where else ""
        table = self.dialect.table(self.table.table)
        if not self.fenced:
            return f"{table}{clause}"
        values = ", ".join(f"{p.sql} AS p{i}" for i, p in enumerate(self.payloads()))
        keys = ", ".join(f"{q(name)} AS k{j}" for j, name in enumerate(self.table.key))
        inner = f"SELECT {values}, {keys} FROM {table}{clause}{self.dialect.payload_fence}"
        return f"({inner}) r"

    def refused(self) -> str:
        """SQL true when the row holds a value the reader refuses ("": no column can). It
        reads the table's columns, so only unfenced dialects (MariaDB) may refuse values."""
        refused = " OR ".join(f"({p.refused_when})" for p in self.payloads() if p.refused_when)
        if refused and self.fenced:
            raise NotPushable(f"{self.dialect.product} payloads cannot refuse values")
        return refused

    def fields(self, indexes: Sequence[int]) -> list[Field]:
        payloads = self.payloads()
        return [
            (
                self.dialect.field(f"p{i}" if self.fenced else payloads[i].sql, payloads[i]),
                payloads[i].binary,
            )
            for i in indexes
        ]

    def row_hash(self) -> str:
        return self.dialect.hash64(self.fields(range(len(self.table.columns))))

    def key_fields(self) -> list[Field]:
        names = [c.name for c in self.table.columns]
        return self.fields([names.index(k) for k in self.table.key])

    def leaf(self) -> str:
        if isinstance(self.scheme, HashLeaves):
            if self.scheme.depth == 0:
                return "0"
            return self.dialect.hash_leaf(self.key_fields(), self.scheme.depth)
        scheme = self.scheme
        clamped = f"LEAST(GREATEST({self.key_ref(0)}, {scheme.low}), {scheme.high}) - {scheme.low}"
        return f"COALESCE({self.dialect.int_div(clamped, scheme.width)}, 0)"


def digest_sql(
    dialect: DigestDialect, table: DigestTable, scheme: LeafScheme, where: str = ""
) -> str:
    """``leaf, row count, sum of row hashes`` for each non-empty leaf of the rows ``where``
    selects (a predicate from ``range_predicate``, or empty for all rows), and when a column
    can hold values the reader refuses (``Payload.refused_when``), how many rows hold one:
    such a value has no canonical bytes, so the comparison must fail, not hash it."""
    query = _Query(dialect, table, scheme)
    refused = query.refused()
    flagged = f", CASE WHEN {refused} THEN 1 ELSE 0 END AS rf" if refused else ""
    counted = ", SUM(rf)" if refused else ""
    # The hashes are computed below the GROUP BY, so an engine that sorts to group sorts
    # two numbers per row rather than the payloads.
    hashed = (
        f"SELECT {query.leaf()} AS leaf, {query.row_hash()} AS h{flagged}"
        f" FROM {query.source(where)}{dialect.payload_fence}"
    )
    return f"SELECT leaf, COUNT(*), SUM(h){counted} FROM ({hashed}) d GROUP BY leaf"


def refused_key_sql(dialect: DigestDialect, table: DigestTable, where: str = "") -> str:
    """``k0..kn`` of one row ``where`` selects that holds a value the reader refuses."""
    query = _Query(dialect, table, HashLeaves(0))
    keys = ", ".join(f"{query.key_ref(j)} AS k{j}" for j in range(len(table.key)))
    refused = query.refused()
    where = f"({where}) AND ({refused})" if where else refused
    return f"SELECT {keys} FROM {query.source(where)} LIMIT 1"


def keyed_sql(
    dialect: DigestDialect,
    table: DigestTable,
    scheme: LeafScheme,
    where: str = "",
    leaves: Sequence[int] = (),
) -> str:
    """``k0..kn, key bytes, leaf, row hash`` of each row ``where`` selects, and (when
    ``leaves`` is given) of those leaves only."""
    query = _Query(dialect, table, scheme)
    keys = ", ".join(f"{query.key_ref(j)} AS k{j}" for j in range(len(table.key)))
    select = (
        f"SELECT {keys}, {dialect.key_bytes(query.key_fields())} AS kb, {query.leaf()} AS leaf,"
        f" {query.row_hash()} AS h FROM {query.source(where)}"
    )
    if not leaves:
        return select
    return f"SELECT * FROM ({select}) s WHERE leaf IN ({', '.join(map(str, leaves))})"


def range_predicate(column: str, low: int | None, high: int | None) -> str:
    """``column`` in ``[low, high)``; an open low bound also takes NULLs (see RangeLeaves)."""
    if low is None and high is None:
        return ""
    if low is None:
        return f"({column} < {high} OR {column} IS NULL)"
    if high is None:
        return f"{column} >= {low}"
    return f"({column} >= {low} AND {column} < {high})"


def leaf_ranges(leaves: Sequence[int]) -> list[tuple[int, int]]:
    """Sorted leaves merged into runs ``[first, stop)`` of consecutive leaves."""
    runs: list[tuple[int, int]] = []
    for leaf in sorted(set(leaves)):
        if runs and runs[-1][1] == leaf:
            runs[-1] = (runs[-1][0], leaf + 1)
        else:
            runs.append((leaf, leaf + 1))
    return runs
