"""A comparison's progress lines, alike in every engine (database, local, hybrid, Spark).

Each phase logs a line as it starts (``comparison orders: leaves (in the databases)``) and
keeps its seconds for the result's ``timings``; the phases that read every compared row or
key say what they found when they end: the rows hashed and their rate (leaves), and the
differing keys (keys). Counts only: never a row value.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from connectors.model import Snapshot

log = logging.getLogger(__name__)

# What reads the source when its product shares no snapshot (MariaDB, SQLite, ...).
OWN_SNAPSHOTS = "a consistent snapshot per reader"


class PhaseTimer:
    """How long each phase of one comparison took, logged as it starts.

    Args:
        name: The comparison's name.
        where: Where its phases run, e.g. ``in the databases``.
    """

    def __init__(self, name: str, where: str) -> None:
        self.name = name
        self.where = where
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, phase: str) -> Iterator[None]:
        """Time the phase ``phase``."""
        log.info("comparison %s: %s (%s)", self.name, phase, self.where)
        started = time.perf_counter()
        yield
        self.phases[phase] = round(time.perf_counter() - started, 3)

    def snapshot(self, snapshot: Snapshot | None) -> None:
        """Say how the source's snapshot was taken (one phrase), so a run shows whether it
        needed a replication slot."""
        how = snapshot.mechanism if snapshot is not None else OWN_SNAPSHOTS
        log.info("comparison %s: source snapshot: %s", self.name, how)

    def hashed(self, rows: Sequence[int], mismatched: int, compared: int) -> None:
        """After the leaves phase: the rows it hashed on each side, their rate, and how many
        of the ``compared`` leaves differ."""
        seconds = self.phases.get("leaves", 0.0)
        total = sum(rows)
        rate = total / seconds if seconds > 0 else float(total)
        log.info(
            "comparison %s: leaves: %s rows hashed in %.1f s (%.0f rows/s), %d of %d differ",
            self.name,
            " + ".join(str(count) for count in rows),
            seconds,
            rate,
            mismatched,
            compared,
        )

    def classified(self, differing: int, leaves: int) -> None:
        """After the keys phase: how many keys differ in the ``leaves`` read."""
        seconds = self.phases.get("keys", 0.0)
        log.info(
            "comparison %s: keys: %d differing in %d leaves (%.1f s)",
            self.name,
            differing,
            leaves,
            seconds,
        )
