"""The frontier of committed capture positions, and the gaps below newer commits.

A capture position is taken while a transaction runs (or, on PostgreSQL, in its commit
trigger), before the transaction's commit is visible. So a reader can see position 12
committed while 11 is not visible yet: 11 belongs to a transaction still committing, or to
one that rolled back (its rows are gone), or was never used. Position 11 is a *gap*.

A gap can only be filled by a transaction that was running when the gap was first seen:
the gap's value was taken before the visible, higher value, whose transaction committed
before the read began; so the gap's owner had started writing by then and was either
running (then it is among the read's running transactions) or had finished (committed:
its row would be visible; rolled back: it never will be). Each gap keeps that set of
possible owners, narrowed at every read to those still running; a gap whose owners have all
finished while it stayed invisible is closed for good.

The *frontier* is the highest position F such that every position <= F is visible or
closed: every transaction at or below it can be emitted, and no transaction can appear at
or below it later. Positions above the first open gap wait, however long it stays open.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc_core.errors import ContractError


class GapTracker:
    """Advances the frontier over the positions visible at each read.

    Args:
        frontier: The position every earlier read has covered (a restart's checkpoint; the
            gaps above it are found again at the first read, owned by what runs then).
    """

    def __init__(self, frontier: int) -> None:
        self.frontier = frontier
        self._gaps: dict[int, frozenset[str]] = {}  # open gap -> transactions that may fill it

    @property
    def open_gaps(self) -> dict[int, frozenset[str]]:
        """The gaps above the frontier still open, with their possible owners."""
        return dict(self._gaps)

    def advance(self, visible: Sequence[int], running: frozenset[str]) -> int:
        """Take one read: ``visible``, the positions above the frontier it sees (ascending),
        and ``running``, the transactions that were still open in it. Returns the new
        frontier."""
        if list(visible) != sorted(set(visible)) or (visible and visible[0] <= self.frontier):
            raise ContractError(f"visible capture positions must ascend above {self.frontier}")
        if not visible:
            return self.frontier
        top = visible[-1]
        if not running:  # nothing can fill a gap any more: they all close
            self._gaps = {}
            self.frontier = top
            return top
        seen = set(visible)
        gaps: dict[int, frozenset[str]] = {}
        for value in range(self.frontier + 1, top):
            if value not in seen:
                owners = self._gaps.get(value, running) & running
                if owners:
                    gaps[value] = owners
        self._gaps = gaps
        self.frontier = min(gaps, default=top + 1) - 1
        return self.frontier
