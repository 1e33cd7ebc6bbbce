"""The lake side of the local engine: DuckDB reads the lake and hashes it into the source's
leaves (``DuckDBLake``, a ``LakeReader`` of ``validator.engines.lake_reader``).

The lake's rows at the agreed position (``state.py`` here), only the compared columns,
get the MD5 flavour of the hash contract in DuckDB SQL (``merkle.duckdb``) and the leaf the
source's ``LeafScheme`` gives their key, computed as ``connectors.pushdown`` computes it in
the source's SQL. A replayed changelog is materialised once in a temporary table (the
window over every event is the costly part); a mirror version is scanned again by the
keys phase, which reads only the mismatched leaves' key ranges and keeps their rows for the
columns phase when they are few. (Keeping an incremental run's leaves in a table too made
its leaves phase slower than the later phases' scans cost.)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from cdc_core.drivers import driver_import
from cdc_core.lake.layout import LakeTable
from connectors.pushdown import LeafScheme, RangeLeaves, leaf_ranges
from merkle.duckdb import (
    hash_leaf_sql,
    key_bytes_sql,
    md5_unsigned64_sql,
    payload_sql,
    quote,
    row_bytes_sql,
)
from merkle.layout import RowLayout
from merkle.tree import LeafDigest
from validator.engines.lake_reader import LAKE_SLICE, LakeRow
from validator.engines.local.state import LakeFiles, lake_files, register, state_sql
from validator.engines.sides.keys import KeyEntry, KeyFinding, collect_keys
from validator.incremental.rehash import MAX_PUSHED_RANGES, covering_runs, key_ranges
from validator.plan import ComparisonPlan
from validator.positions import SourcePositions, confirm_exact, lake_at, read_at_own_mark
from validator.quiet_log import quiet_log_of

if TYPE_CHECKING:
    import pyarrow as pa

    from validator.engines.sides.spark.side import Side

_MASK64 = (1 << 64) - 1
_FILES, _STATE, _WANTED = "lake_files", "lake_state", "wanted_keys"
_FOUND = "mismatched_rows"
# The rows of at most this many mismatched leaves are kept from the keys phase for the
# columns phase (another scan of a 10M-row mirror: 0.2 s); more could be most of the lake.
MAX_KEPT_LEAVES = 1000
_LEAF, _ROW_HASH, _KEY_BYTES = "_leaf", "_row_hash", "_key_bytes"


def connect(spill_dir: str) -> Any:
    """A private in-memory DuckDB connection that spills to ``spill_dir`` (a replayed
    changelog larger than memory). The hash SQL does not depend on its time zone
    (``merkle.duckdb``), and a TIMESTAMPTZ read back into Python keeps its instant; row
    order is never relied on, so DuckDB need not keep it."""
    with driver_import("the local engine"):
        import duckdb

    return duckdb.connect(config={"temp_directory": spill_dir, "preserve_insertion_order": False})


def range_leaf_sql(key: str, scheme: RangeLeaves) -> str:
    """The leaf of an integer key under ``scheme``, as ``connectors.pushdown`` writes it in
    SQL: keys beyond the planned range fall into the first or last leaf, NULL into the
    first. ``//`` truncates, exact on the non-negative clamped offset."""
    column = quote(key)
    clamped = f"least(greatest({column}, {scheme.low}), {scheme.high}) - {scheme.low}"
    return f"CAST(coalesce(({clamped}) // {scheme.width}, 0) AS BIGINT)"


def _key_range_sql(key: str, low: int | None, high: int | None) -> str:
    """``key`` in ``[low, high)``; an open low bound also takes NULLs (as range_predicate)."""
    column = quote(key)
    if low is None:
        return "TRUE" if high is None else f"({column} < {high} OR {column} IS NULL)"
    if high is None:
        return f"{column} >= {low}"
    return f"({column} >= {low} AND {column} < {high})"


def leaf_bits_sql(leaf: str, count: int, leaves: Collection[int]) -> str:
    """SQL true when the leaf ``leaf`` (of ``count`` leaves) is one of ``leaves``: one bit a
    leaf, looked up per row. Faster than a list searched per row (30,000 leaves of a
    million: 1.1 s against 1.5 s over 10M rows), or a hash semi-join (1.4 s), and one string
    literal DuckDB parses in milliseconds."""
    bits = bytearray(b"0" * count)
    for index in leaves:
        bits[index] = ord("1")
    return f"get_bit('{bits.decode()}'::BIT, CAST({leaf} AS INTEGER)) = 1"


def leaves_filter_sql(key: str, scheme: RangeLeaves, leaves: Collection[int]) -> str:
    """SQL true for the rows of ``leaves`` under range leaves: at most ``MAX_PUSHED_RANGES``
    key ranges covering them (pushed into the scan), then the exact leaves. Ranges that
    cover most leaves skip nothing and cost their test on every row (0.1 s of the 0.9 s
    hashing 10M rows' scattered leaves), so then only the exact leaves are asked for."""
    wanted = sorted(set(leaves))
    if not wanted:
        return "FALSE"
    exact = leaf_bits_sql(range_leaf_sql(key, scheme), scheme.count, wanted)
    covering = covering_runs(leaf_ranges(wanted), MAX_PUSHED_RANGES)
    if sum(b - a for a, b in covering) * 2 > scheme.count:
        return exact
    ranges = [_key_range_sql(key, *scheme.bounds(a, b)) for a, b in covering]
    return f"({' OR '.join(ranges)}) AND {exact}"


class DuckDBLake:
    """DuckDB on this machine reads and hashes the lake (the local engine's
    ``LakeReader``); ``connection`` is the engine's, closed by it."""

    engine = "local"
    where = "lake in DuckDB"

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def read(self, plan: ComparisonPlan, positions: SourcePositions | None) -> DuckDBLakeRead:
        """Wait for the lake to reach ``positions``, then find the files that hold its state
        (``read_at_own_mark``: at its high-water mark)."""
        reflected = plan.reflected
        connection, table = reflected.target_connection, reflected.comparison.target.table
        assert connection.lake is not None and reflected.target is None  # a lake target
        if read_at_own_mark(reflected.source.url):
            positions = None
        lake_table = LakeTable(connection.lake, table)
        source_table = reflected.comparison.source.table
        quiet = quiet_log_of(reflected.source.url, reflected.source.password, source_table)
        where = lake_at(lake_table, positions, plan.settings.lake_wait_timeout_s, quiet)
        files = lake_files(lake_table, where.at, reflected.target_key[0])
        confirm_exact(lake_table, where)
        label = f"{connection.name}:{table}"
        return DuckDBLakeRead(self.connection, plan, files, where.at, (label, where.text))


class DuckDBLakeRead:
    """A lake table's files and the position it is read at, hashed on demand."""

    def __init__(
        self,
        connection: Any,
        plan: ComparisonPlan,
        files: LakeFiles,
        at: int | SourcePositions | None,
        described: tuple[str, str | None],
    ) -> None:
        self.connection, self.plan, self.files, self.at = connection, plan, files, at
        self.label, self.position = described
        self.columns: Sequence[str] = files.schema.names
        self.target: Side | None = None  # no Spark frame: expectations need another engine

    def hashed(
        self, scheme: LeafScheme, leaves: Collection[int] | None, stack: ExitStack
    ) -> DuckDBHashedLake:
        """The compared columns (named as the layout names them), their row hash and leaf;
        only the rows of ``leaves`` (range leaves) when given."""
        reflected = self.plan.reflected
        layout, names = reflected.reconciled.layout, reflected.reconciled.target_names
        where, files = "TRUE", self.files
        if leaves is not None and isinstance(scheme, RangeLeaves):
            where = leaves_filter_sql(names[layout.key[0]], scheme, leaves)
            files = files.meeting(key_ranges(scheme, leaves))
        register(self.connection, _FILES, files)
        columns = [names[n] for n in layout.names]
        state = state_sql(_FILES, self.files, columns, reflected.target_key, self.at, where)
        kept = None
        if not self.files.exact:  # the events laid over the mirror once, not once a phase
            kept = f"CREATE TEMP TABLE {_STATE} AS {state}"
            stack.callback(self.connection.execute, f"DROP TABLE IF EXISTS {_STATE}")
            state = f"SELECT * FROM {_STATE}"
        renamed = ", ".join(f"{quote(names[n])} AS {quote(n)}" for n in layout.names)
        types = {n: self.files.schema.field(names[n]).type for n in layout.names}
        rows = f"SELECT {renamed} FROM ({state})"
        return DuckDBHashedLake(self.connection, rows, layout, types, scheme, kept)


class DuckDBHashedLake:
    """The lake's hashed rows in DuckDB (``HashedLake``); ``kept`` (SQL creating the table
    ``rows`` reads) runs at the first phase, so the leaves phase reads the lake while the
    source computes its digests."""

    def __init__(
        self,
        connection: Any,
        rows: str,
        layout: RowLayout,
        types: dict[str, pa.DataType],
        scheme: LeafScheme,
        kept: str | None,
    ) -> None:
        self.connection, self.rows_sql, self.layout = connection, rows, layout
        self.types, self.scheme, self.kept = types, scheme, kept
        self.found: frozenset[int] = frozenset()  # the leaves whose rows are in _FOUND

    def _execute(self, sql: str) -> list[Any]:
        """The rows of ``sql``, once the kept rows are."""
        if self.kept is not None:
            self.connection.execute(self.kept)
            self.kept = None
        return self.connection.execute(sql).fetchall()

    def _leaf(self) -> str:
        if isinstance(self.scheme, RangeLeaves):
            return range_leaf_sql(self.layout.key[0], self.scheme)
        return hash_leaf_sql(key_bytes_sql(self.layout, self.types), self.scheme.depth)

    def _in_leaves(self, leaves: Collection[int]) -> str:
        """The compared rows of ``leaves`` with their leaf (a key-range filter the scan can
        use under range leaves)."""
        leafed = f"SELECT *, {self._leaf()} AS {_LEAF} FROM ({self.rows_sql})"
        if isinstance(self.scheme, RangeLeaves):
            ranges = leaves_filter_sql(self.layout.key[0], self.scheme, leaves)
            return f"{leafed} WHERE {ranges}"
        exact = leaf_bits_sql(_LEAF, self.scheme.count, leaves)
        return f"SELECT * FROM ({leafed}) WHERE {exact}"

    def digests(self) -> dict[int, LeafDigest]:
        """The lake's leaf digests: one GROUP BY over the hashed rows."""
        row_hash = md5_unsigned64_sql(row_bytes_sql(self.layout, self.types))
        hashed = f"SELECT {self._leaf()} AS {_LEAF}, {row_hash} AS h FROM ({self.rows_sql})"
        sql = f"SELECT {_LEAF}, count(*), sum(h) FROM ({hashed}) GROUP BY {_LEAF}"
        return {
            int(leaf): LeafDigest(int(count), int(total) & _MASK64)
            for leaf, count, total in self._execute(sql)
        }

    def keys(self, leaves: Sequence[int]) -> dict[bytes, KeyEntry]:
        """The lake's keys in ``leaves``, by canonical key bytes (as the source's are)."""
        if not leaves:
            return {}
        layout, types = self.layout, self.types
        rows = self._in_leaves(leaves)
        if len(leaves) <= MAX_KEPT_LEAVES:
            self._execute(f"CREATE OR REPLACE TEMP TABLE {_FOUND} AS {rows}")
            self.found, rows = frozenset(leaves), f"SELECT * FROM {_FOUND}"
        selected = ", ".join(quote(k) for k in layout.key)
        sql = (
            f"SELECT {selected}, {key_bytes_sql(layout, types)}, {_LEAF},"
            f" {md5_unsigned64_sql(row_bytes_sql(layout, types))} FROM ({rows})"
        )
        return collect_keys(self._execute(sql), len(layout.key), LAKE_SLICE)

    def _rows_sql(self, changed: Sequence[KeyFinding]) -> str:
        """Key bytes, payloads and values of the rows of ``changed`` keys (``_WANTED``)."""
        layout, types = self.layout, self.types
        payloads = [
            payload_sql(quote(c.name), types[c.name], c.ltype, layout.options)
            for c in layout.columns
        ]
        leaves = {f.leaf for f in changed}
        rows = f"SELECT * FROM {_FOUND}" if leaves <= self.found else self._in_leaves(leaves)
        keyed = f"SELECT *, {key_bytes_sql(layout, types)} AS {_KEY_BYTES} FROM ({rows})"
        values = ", ".join(quote(n) for n in layout.names)
        wanted = f"SELECT {_KEY_BYTES} FROM {_WANTED}"
        return (
            f"SELECT {_KEY_BYTES}, {', '.join(payloads)}, {values}"
            f" FROM ({keyed}) WHERE {_KEY_BYTES} IN ({wanted})"
        )

    def rows(self, changed: Sequence[KeyFinding]) -> dict[bytes, LakeRow]:
        """The canonical payloads and values (layout order) of the lake's rows of
        ``changed`` keys, by canonical key bytes."""
        if not changed:
            return {}
        listed = ",".join(f.key_bytes.hex() for f in changed)  # no Arrow object: see duckdb_types
        self.connection.execute(
            f"CREATE OR REPLACE TEMP TABLE {_WANTED} AS"
            f" SELECT from_hex(unnest(string_split('{listed}', ','))) AS {_KEY_BYTES}"
        )
        found = self._execute(self._rows_sql(changed))
        width = len(self.layout.columns)
        return {
            bytes(row[0]): (
                [None if p is None else bytes(p) for p in row[1 : width + 1]],
                list(row[width + 1 :]),
            )
            for row in found
        }
