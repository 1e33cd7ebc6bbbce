"""The row layout of a comparison: which columns are hashed, in which order, and the key."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cdc_core.errors import ContractError
from merkle.options import ComparisonOptions
from merkle.types import LogicalType


@dataclass(frozen=True, slots=True)
class ColumnSpec:
    """One compared column: its name (as the comparison calls it) and logical type."""

    name: str
    ltype: LogicalType
    sensitive: bool = False


@dataclass(frozen=True, slots=True)
class RowLayout:
    """What both sides hash: ``columns`` in order, the ``key`` among them, and the options.

    The row hash covers every column (key columns included), so a row whose key and values
    are equal on both sides hashes equal; the key hash covers the key columns, in key order.
    """

    columns: tuple[ColumnSpec, ...]
    key: tuple[str, ...]
    options: ComparisonOptions = field(default_factory=ComparisonOptions)

    def __post_init__(self) -> None:
        names = [column.name for column in self.columns]
        if len(set(names)) != len(names):
            raise ContractError(f"duplicate column names in row layout: {names}")
        if not self.key:
            raise ContractError("a row layout needs at least one key column")
        missing = [name for name in self.key if name not in names]
        if missing:
            raise ContractError(f"key columns not among the compared columns: {missing}")

    @property
    def whole_row_key(self) -> bool:
        """Whether the key is every compared column (a table without a key): equal rows
        are then copies of one key, and the sides compare how many copies each holds."""
        return set(self.key) == set(self.names)

    @classmethod
    def of(
        cls,
        columns: Sequence[tuple[str, LogicalType]],
        key: Sequence[str],
        options: ComparisonOptions | None = None,
    ) -> RowLayout:
        """Build a layout from ``(name, logical type)`` pairs."""
        specs = tuple(ColumnSpec(name, ltype) for name, ltype in columns)
        return cls(specs, tuple(key), options or ComparisonOptions())

    def excluding(self, names: Sequence[str]) -> RowLayout:
        """This layout without ``names`` (the config's ``columns: {exclude: [...]}``).

        Both sides hash the layout, so an excluded column never affects either hash.
        """
        unknown = sorted(set(names) - set(self.names))
        if unknown:
            raise ContractError(f"cannot exclude columns that are not compared: {unknown}")
        keys = sorted(set(names) & set(self.key))
        if keys:
            raise ContractError(f"cannot exclude key columns: {keys}")
        kept = tuple(column for column in self.columns if column.name not in set(names))
        return RowLayout(kept, self.key, self.options)

    @property
    def names(self) -> tuple[str, ...]:
        """Column names in hashing order."""
        return tuple(column.name for column in self.columns)

    @property
    def key_columns(self) -> tuple[ColumnSpec, ...]:
        """The key columns, in key order."""
        by_name = {column.name: column for column in self.columns}
        return tuple(by_name[name] for name in self.key)

    def key_positions(self) -> tuple[int, ...]:
        """Positions of the key columns in a row given in hashing order."""
        return tuple(self.names.index(name) for name in self.key)
