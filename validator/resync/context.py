"""What a re-sync knows about one comparison: both sides, the key and the hashed layout.

The layout is reconciled exactly as the validation reconciles it (``validator.reflection``), so
the re-sync decides "equal" by the same hash contract, column rules and options that
found the difference.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cdc_core.config import ConnectionConfig
from cdc_core.lake.layout import LakeTable
from connectors.base import Connector
from connectors.model import POSITION_COLUMN, Partition, Snapshot, TableSchema
from merkle.hashing import RowHasher
from validator.config import ComparisonConfig, ValidatorConfig
from validator.reconcile import Reconciled
from validator.reflection import connector_of, reflect_comparison
from validator.resync.keys import TypedKey, check_key_types

Row = list[object]  # one row's values in layout order
Rows = dict[bytes, Row]  # canonical key bytes -> row


@dataclass(frozen=True, slots=True)
class ComparisonContext:
    """One comparison prepared for a re-sync.

    Attributes:
        comparison: Its configuration.
        source: The source's connector.
        source_schema: The reflected source table.
        target: The target connection (a lake or a database).
        reconciled: The layout both sides hash (source column names) and target names.
    """

    comparison: ComparisonConfig
    source: Connector
    source_schema: TableSchema
    target: ConnectionConfig
    reconciled: Reconciled

    @property
    def name(self) -> str:
        """The comparison's name."""
        return self.comparison.name

    @property
    def key(self) -> tuple[str, ...]:
        """Key columns, source names."""
        return self.reconciled.layout.key

    @property
    def target_key(self) -> tuple[str, ...]:
        """Key columns, target names."""
        return tuple(self.reconciled.target_names[k] for k in self.key)

    @property
    def target_columns(self) -> tuple[str, ...]:
        """The compared columns in layout order, as the target names them."""
        return tuple(self.reconciled.target_names[n] for n in self.reconciled.layout.names)

    @property
    def sensitive(self) -> frozenset[str]:
        """Sensitive columns, source and target names."""
        rules = self.comparison.columns
        return frozenset({*rules.sensitive, *(rules.target_name(c) for c in rules.sensitive)})

    @property
    def lake_table(self) -> LakeTable:
        """The target as a lake table (only for lake targets)."""
        assert self.target.lake is not None
        return LakeTable(self.target.lake, self.comparison.target.table)


def prepare(config: ValidatorConfig, comparison: ComparisonConfig) -> ComparisonContext:
    """Reflect both sides of ``comparison`` and reconcile its layout (as validation does)."""
    reflected = reflect_comparison(config, comparison)
    check_key_types(reflected.reconciled.layout, comparison.name)
    return ComparisonContext(
        comparison,
        reflected.source,
        reflected.source_schema,
        reflected.target_connection,
        reflected.reconciled,
    )


@dataclass(frozen=True, slots=True)
class SourceRead:
    """Rows of chosen keys read in one source snapshot.

    Attributes:
        rows: Canonical key bytes -> the row's values in layout order.
        extra: Canonical key bytes -> values of ``extra_columns`` (lake refreshes).
        position: The snapshot's log position (None: not known, or no log).
    """

    rows: Rows
    position: int | None
    extra: dict[bytes, dict[str, object]]


def read_source(
    context: ComparisonContext, keys: Sequence[TypedKey], extra_columns: Sequence[str] = ()
) -> SourceRead:
    """Read ``keys`` from the source in one consistent snapshot (one partition)."""
    names = list(context.reconciled.layout.names)
    wanted = names + [c for c in extra_columns if c not in names]
    hasher = RowHasher(context.reconciled.layout)
    rows: Rows = {}
    extra: dict[bytes, dict[str, object]] = {}
    position: int | None = None
    with context.source.shared_snapshot() as snapshot:
        selector = Partition(-1, key_columns=context.key, keys=tuple(keys))
        if snapshot is not None:
            position = snapshot.position
        for record in _records(context.source, context.source_schema, wanted, selector, snapshot):
            values: Row = [record[n] for n in names]
            key_bytes = hasher.key_bytes(values)
            rows[key_bytes] = values
            extra[key_bytes] = {c: record[c] for c in wanted}
            read_at = record[POSITION_COLUMN]
            position = read_at if isinstance(read_at, int) else position
    return SourceRead(rows, position, extra)


def _records(
    connector: Connector,
    schema: TableSchema,
    columns: Sequence[str],
    selector: Partition,
    snapshot: Snapshot | None,
) -> Iterator[dict[str, object]]:
    for batch in connector.read_partition(schema, columns, selector, snapshot):
        yield from batch.to_pylist()


def read_database_target(
    context: ComparisonContext, connector: Connector, schema: TableSchema, keys: Sequence[TypedKey]
) -> Rows:
    """Current rows of ``keys`` in a database target, values in layout order."""
    columns = list(context.target_columns)
    hasher = RowHasher(context.reconciled.layout)
    selector = Partition(-1, key_columns=context.target_key, keys=tuple(keys))
    rows: Rows = {}
    for record in _records(connector, schema, columns, selector, None):
        values: Row = [record[c] for c in columns]
        rows[hasher.key_bytes(values)] = values
    return rows


def key_bytes_of(context: ComparisonContext, key: TypedKey) -> bytes:
    """Canonical key bytes of a typed key (how rows of both sides are matched)."""
    from merkle.canonical import RowEncoder

    layout = context.reconciled.layout
    encoder = RowEncoder([c.ltype for c in layout.key_columns], layout.options)
    return encoder.to_bytes(list(key))


def all_keys(context: ComparisonContext) -> Iterator[TypedKey]:
    """Every key of both sides (source, then target), typed: how masked keys of a result are
    found again (``validator.key_masks.resolve``). A full scan of the key columns."""
    for record in _records(
        context.source, context.source_schema, list(context.key), Partition(-1), None
    ):
        yield tuple(record[name] for name in context.key)
    if context.target.is_lake:
        yield from _lake_keys(context)
        return
    connector = connector_of(context.target)
    schema = connector.reflect(context.comparison.target.table)
    for record in _records(connector, schema, list(context.target_key), Partition(-1), None):
        yield tuple(record[name] for name in context.target_key)


def _lake_keys(context: ComparisonContext) -> Iterator[TypedKey]:
    mirror = context.lake_table.mirror_at
    if not mirror.join("_delta_log").is_dir():
        return
    table = mirror.open_delta().to_pyarrow_table(columns=list(context.target_key))
    for record in table.to_pylist():
        yield tuple(record[name] for name in context.target_key)
