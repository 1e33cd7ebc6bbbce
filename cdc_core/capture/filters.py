"""Which tables and columns a pipeline captures, as a policy.

- ``accept``: every table except those the ``drop`` patterns match;
- ``drop``: no table except those the ``accept`` patterns match (a plain ``tables:`` list in
  the configuration is this policy).

Patterns are shell-style globs over the canonical ``schema.table`` (``cdc_core.names``:
``shop.*``, ``*.audit_?``), matched case-sensitively; a pattern equal to a table's name
matches it whatever characters it holds. Ignored columns never reach the buffer, the row
image store or the lake.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Literal

from cdc_core.capture.events import RowChange
from cdc_core.errors import ConfigError
from cdc_core.names import parse_table

Policy = Literal["accept", "drop"]


@dataclass(frozen=True, slots=True)
class TableFilter:
    """The tables a pipeline captures and the columns it ignores.

    Args:
        policy: ``accept`` (all but ``drop``) or ``drop`` (none but ``accept``).
        accept: Globs of tables to capture under the ``drop`` policy.
        drop: Globs of tables to leave out under the ``accept`` policy.
        ignore_columns: Per table (exact name), columns that never reach the lake.
    """

    policy: Policy
    accept: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    ignore_columns: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # Per table, whether it is captured: asked per change, and the filter never changes.
    _captured: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.policy not in ("accept", "drop"):
            raise ConfigError(f"filter policy must be accept or drop, not {self.policy!r}")
        if self.policy == "accept" and self.accept:
            raise ConfigError("the accept policy takes drop patterns, not accept patterns")
        if self.policy == "drop" and self.drop:
            raise ConfigError("the drop policy takes accept patterns, not drop patterns")

    @classmethod
    def of_tables(cls, tables: Sequence[str]) -> TableFilter:
        """Capture exactly ``tables``."""
        return cls("drop", accept=tuple(tables))

    def as_logged(self, captured: Sequence[str]) -> TableFilter:
        """This filter with each plain name given without a schema (``orders``) spelled as
        the log names the table (``shop.orders``, from ``captured``): a change of
        ``shop.orders`` must match it, or the table is loaded and its changes dropped."""
        by_name = {parse_table(table).name: table for table in captured}
        renamed = {
            pattern: by_name[pattern]
            for pattern in self.accept
            if pattern in by_name and parse_table(pattern).schema is None
        }
        if not renamed:
            return self
        return replace(
            self,
            accept=tuple(renamed.get(p, p) for p in self.accept),
            ignore_columns={renamed.get(t, t): c for t, c in self.ignore_columns.items()},
        )

    def captures(self, table: str) -> bool:
        """True when changes of ``table`` go to the lake."""
        found = self._captured.get(table)
        if found is None:
            if self.policy == "accept":
                found = not any(_matches(table, pattern) for pattern in self.drop)
            else:
                found = any(_matches(table, pattern) for pattern in self.accept)
            self._captured[table] = found
        return found

    def select(self, tables: Sequence[str]) -> list[str]:
        """The captured tables among ``tables``, in their order."""
        return [table for table in tables if self.captures(table)]

    def strip(self, change: RowChange) -> RowChange:
        """``change`` without the ignored columns of its table."""
        ignored = self.ignore_columns.get(change.table)
        if not ignored:
            return change
        return replace(
            change, after=_without(change.after, ignored), before=_without(change.before, ignored)
        )

    def strip_row(self, table: str, row: dict[str, object]) -> dict[str, object]:
        """A snapshot row without the ignored columns of ``table``."""
        ignored = self.ignore_columns.get(table)
        return row if not ignored else _without(row, ignored) or {}


def _matches(table: str, pattern: str) -> bool:
    # A name is its own pattern even when it holds glob characters (a table a[1]).
    return table == pattern or fnmatchcase(table, pattern)


def _without(
    image: Mapping[str, object] | None, ignored: frozenset[str]
) -> dict[str, object] | None:
    if image is None:
        return None
    return {column: value for column, value in image.items() if column not in ignored}
