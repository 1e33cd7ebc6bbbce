"""Both sides of a comparison reflected and its row layout reconciled, once, for whoever
compares them: the validation (either engine) and the re-sync, so both decide "equal" by
the same columns, types, rules and options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_core.config import ConnectionConfig
from cdc_core.errors import ConfigError
from cdc_core.lake.layout import LakeTable, sources_of
from connectors.base import Connector
from connectors.model import TableSchema
from connectors.registry import connector_for
from validator.config import ComparisonConfig, ValidatorConfig
from validator.positions import lake_columns, read_at_own_mark
from validator.quiet_log import quiet_log_of
from validator.reconcile import Reconciled, SideRounding, logical_type_of_arrow, reconcile

if TYPE_CHECKING:
    import pyarrow as pa


def connector_of(connection: ConnectionConfig) -> Connector:
    """The connector of a database connection (a lake has none)."""
    if connection.url is None:
        raise ConfigError(f"connection {connection.name} is a lake; use it as a target")
    password = connection.password.reveal() if connection.password else None
    return connector_for(connection.url, password)


def source_key(comparison: ComparisonConfig, schema: TableSchema) -> tuple[str, ...]:
    """The configured key, else the source's primary key, else every compared column (a
    table without a key is compared as a multiset of rows: ``RowLayout.whole_row_key``)."""
    excluded = set(comparison.columns.exclude)
    key = comparison.key or schema.primary_key
    if not key:
        key = tuple(
            c.name for c in schema.columns if c.ltype is not None and c.name not in excluded
        )
    if not key:
        raise ConfigError(
            f"comparison {comparison.name}: {comparison.source.table} has no column to compare;"
            " set key: [...] in the comparison"
        )
    missing = [k for k in key if k not in {c.name for c in schema.columns}]
    if missing:
        raise ConfigError(f"comparison {comparison.name}: key columns {missing} do not exist")
    return tuple(key)


@dataclass(frozen=True, slots=True)
class Reflected:
    """A comparison's two sides as reflected, and the layout both hash.

    Attributes:
        comparison: Its configuration.
        source: The source's connector.
        source_schema: The reflected source table.
        key: Key columns, source names.
        target_connection: The target's connection (a lake or a database).
        target: The target's connector and reflected table (None for a lake).
        reconciled: The layout both sides hash (source column names) and target names.
        lake_schema: A lake target's Arrow schema (its changelog's); None for a database.
    """

    comparison: ComparisonConfig
    source: Connector
    source_schema: TableSchema
    key: tuple[str, ...]
    target_connection: ConnectionConfig
    target: tuple[Connector, TableSchema] | None
    reconciled: Reconciled
    lake_schema: pa.Schema | None = None

    @property
    def source_label(self) -> str:
        """The source as results name it (``ComparisonConfig.source_label``)."""
        return self.comparison.source_label

    @property
    def target_label(self) -> str:
        """The target as results name it (``ComparisonConfig.target_label``)."""
        return self.comparison.target_label

    @property
    def at_log_position(self) -> bool:
        """Whether the source must be read at an exact log position: its copy is a lake fed
        from its log, read as of the source's positions. A database target is read as it is
        now and a lake fed by trigger capture at its own mark, so they need only a
        consistent snapshot."""
        return self.target is None and not read_at_own_mark(self.source.url)

    @property
    def target_key(self) -> tuple[str, ...]:
        """Key columns, target names."""
        return tuple(self.reconciled.target_names[k] for k in self.key)


def reflect_comparison(config: ValidatorConfig, comparison: ComparisonConfig) -> Reflected:
    """Reflect both sides of ``comparison`` and reconcile their columns."""
    source_connection = config.connections[comparison.source.connection]
    target_connection = config.connections[comparison.target.connection]
    connector = connector_of(source_connection)
    schema = connector.reflect(comparison.source.table)
    key = source_key(comparison, schema)
    target: tuple[Connector, TableSchema] | None = None
    lake_schema: pa.Schema | None = None
    if target_connection.lake is None:
        target_connector = connector_of(target_connection)
        target = (target_connector, target_connector.reflect(comparison.target.table))
    else:
        lake_table = LakeTable(target_connection.lake, comparison.target.table)
        own_mark = read_at_own_mark(source_connection.url or "")
        if not own_mark:  # the source's positions numbered as the table's pipeline does
            lake, table = target_connection.lake, comparison.target.table
            connector.follow_lake(lambda: [(s, at.value) for s, at in sources_of(lake, table)])
        position = None if own_mark else connector.log_position()
        timeout_s = config.validation.lake_wait_timeout_s
        quiet = quiet_log_of(source_connection.url, connector.password, comparison.source.table)
        lake_schema = lake_columns(lake_table, position, timeout_s, quiet=quiet)
    rules = comparison.columns
    reconciled = reconcile(
        {c.name: c.ltype for c in schema.columns},
        _target_types(target, lake_schema),
        key,
        rules.rename,
        rules.exclude,
        rules.sensitive,
        comparison.options,
        boolean=rules.boolean,
        rounding=SideRounding(
            connector.timestamp_rounding(), target[0].timestamp_rounding() if target else None
        ),
        whole_row=not (comparison.key or schema.primary_key),
    )
    key = reconciled.layout.key
    return Reflected(
        comparison, connector, schema, key, target_connection, target, reconciled, lake_schema
    )


def _target_types(
    target: tuple[Connector, TableSchema] | None, lake_schema: pa.Schema | None
) -> dict[str, Any]:
    if target is not None:
        return {c.name: c.ltype for c in target[1].columns}
    assert lake_schema is not None
    return {
        f.name: logical_type_of_arrow(f.type) for f in lake_schema if not f.name.startswith("_")
    }
