"""How one comparison sizes its tree and its report, whichever engine runs it."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class CompareSettings:
    """Tree size and report size for one comparison, and how long to wait for a lake."""

    depth: int | None = None
    rows_per_leaf: int = 4096
    max_reported_rows: int = 1000
    sensitive: frozenset[str] = field(default_factory=frozenset)
    lake_wait_timeout_s: float = 300.0  # a lake target must reach the source's position
