"""The frontier of committed capture positions, and the gaps below newer commits.

A capture position is taken while a transaction runs (or, on PostgreSQL, in its commit
trigger), before the transaction's commit is visible. So a reader can see position 12
committed while 11 is not visible yet: 11 belongs to a transaction still committing, or to
one that rolled back (its rows are gone), or was never used. Position 11 is a *gap*.

Each read gives the visible positions, the sequence value ``taken`` read *before* it, and
the transactions ``running`` when that value was read (listed after it). A gap at or below
``taken`` can only be filled by a transaction in ``running``: its value was taken before
``taken`` was read, so its owner had begun by then and was either still running when
``running`` was listed, or had finished before the read (committed: the value would be
visible; rolled back: it never will be). Each such gap keeps that set of possible owners,
narrowed at every read to those still running; a gap whose owners have all finished while
it stayed invisible is closed for good. A gap above ``taken`` (below a visible position
taken after the sequence was read) has owners the read cannot name: it holds the frontier
until a later read, whose ``taken`` covers it, names them.

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
        """The gaps above the frontier whose possible owners are known, with them."""
        return dict(self._gaps)

    def advance(self, visible: Sequence[int], running: frozenset[str], taken: int) -> int:
        """Take one read and return the new frontier.

        Args:
            visible: The positions above the frontier the read sees (ascending).
            running: The transactions running when ``taken`` was read, listed after it.
            taken: The capture sequence's value read before the read began.
        """
        if list(visible) != sorted(set(visible)) or (visible and visible[0] <= self.frontier):
            raise ContractError(f"visible capture positions must ascend above {self.frontier}")
        top = max(visible[-1] if visible else self.frontier, taken)
        if top <= self.frontier:
            return self.frontier
        if not running and taken >= top:  # nothing can fill a gap any more: they all close
            self._gaps = {}
            self.frontier = top
            return top
        seen = set(visible)
        gaps: dict[int, frozenset[str]] = {}
        unnamed = top + 1  # the first gap above taken (its owners are not known yet)
        for value in range(self.frontier + 1, top + 1):
            if value in seen:
                continue
            if value > taken:
                unnamed = value
                break
            owners = self._gaps.get(value, running) & running
            if owners:
                gaps[value] = owners
        self._gaps = gaps
        self.frontier = min(min(gaps, default=unnamed), unnamed) - 1
        return self.frontier
