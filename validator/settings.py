"""How one comparison sizes its tree and its report, whichever engine runs it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class IncrementalSettings:
    """Whether a comparison keeps its leaf digests and re-hashes only what changed
    (``validator.incremental``).

    Attributes:
        enabled: Keep the validated digests in the lake and, when they apply, re-hash only
            the leaves the changelog shows changed plus a sweep (``validation.incremental``).
        force_full: This run re-hashes every leaf, and stores the state (``--full``).
        sweep_share: Share of the leaves re-hashed from scratch by each incremental run, so
            every leaf is swept within ``sweep_runs`` runs (``validation.sweep_share``).
    """

    enabled: bool = False
    force_full: bool = False
    sweep_share: float = 0.1

    def __post_init__(self) -> None:
        if not 0 < self.sweep_share <= 1:
            raise ValueError(f"sweep_share must be in (0, 1], not {self.sweep_share}")

    @property
    def keeps_state(self) -> bool:
        """Whether the run stores its digests (an incremental or a forced full run)."""
        return self.enabled or self.force_full

    @property
    def sweep_runs(self) -> int:
        """Every leaf is swept within this many incremental runs."""
        return math.ceil(1 / self.sweep_share)


@dataclass(frozen=True, slots=True)
class CompareSettings:
    """Tree size and report size for one comparison, and how long to wait for a lake."""

    depth: int | None = None
    rows_per_leaf: int = 4096
    max_reported_rows: int = 1000
    sensitive: frozenset[str] = field(default_factory=frozenset)
    lake_wait_timeout_s: float = 300.0  # a lake target must reach the source's position
    incremental: IncrementalSettings = field(default_factory=IncrementalSettings)
