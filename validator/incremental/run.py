"""One comparison's use of its stored state: full or incremental, which leaves to re-hash,
the digests to reuse, and the state to store after.

The hybrid engine calls, in order: ``begin`` (before it reads anything: the stored state,
the leaves to use and the lake's Delta versions), ``leaves_to_rehash`` (once the source's
positions P1 are known; None: every leaf), ``merged`` (fresh digests plus stored ones) and
``finish`` (store the state, say what the run proves).

Only the re-hashed leaves need comparing: a reused leaf held equal digests on both sides
when they were stored, since a leaf that differed is always re-hashed.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from cdc_core.lake.layout import LakeTable
from connectors.pushdown import LeafScheme, RangeLeaves
from validator.incremental.changed_leaves import changed_leaves
from validator.incremental.fingerprint import differing_parts, fingerprint_parts
from validator.incremental.guarantee import full_coverage, incremental_coverage
from validator.incremental.lake_log import log_mark, why_not_carried
from validator.incremental.state import (
    CorruptState,
    Digests,
    ValidationState,
    legacy_state,
    read_state,
    state_path,
    write_state,
)
from validator.incremental.stored_digests import StoredDigests
from validator.incremental.sweep import (
    Sweep,
    next_sweep,
    runs_until_swept,
    source_stripes,
    sweep_runs,
)
from validator.positions import SourcePositions
from validator.result import Coverage

if TYPE_CHECKING:
    from validator.plan import ComparisonPlan

log = logging.getLogger(__name__)
Sides = tuple[Digests, Digests]  # the source's digests, the lake's
Stored = tuple[StoredDigests, StoredDigests]
# A stored leaf plan is kept while the keys span at most this many times its range.
MAX_GROWTH = 2


def _span(a: RangeLeaves, b: RangeLeaves) -> int:
    """Keys from the lower to the higher planned end of both leaf plans."""
    return max(a.high, b.high) - min(a.low, b.low) + 1


class Increment:
    """How one run uses the stored state (see the module docstring)."""

    def __init__(self, plan: ComparisonPlan, scheme: LeafScheme) -> None:
        self.settings = plan.settings.incremental
        self.scheme = scheme
        self.reason: str | None = None
        self.state: ValidationState | None = None
        self.sweep: Sweep | None = None
        self.changed = 0
        self.rehash: frozenset[int] | None = None
        reflected = plan.reflected
        lake = reflected.target_connection.lake
        self.active = plan.incremental and lake is not None
        if not self.active or lake is None:
            return
        self.plan = plan
        self.table = LakeTable(lake, reflected.comparison.target.table)
        self.path = state_path(self.table, plan.comparison.name)
        self.key = reflected.target_key[0]
        self.marks = (log_mark(self.table.changelog_at), log_mark(self.table.mirror_at))
        if not isinstance(scheme, RangeLeaves):
            self.reason = "incremental validation needs key-range leaves (an integer first key)"
        elif self.settings.force_full:
            self.reason = "a full run was asked for (--full)"
        else:
            self.reason = self._load(scheme)

    def _load(self, fresh: RangeLeaves) -> str | None:
        """Keep the stored state if it applies (and use its leaves); else why not."""
        try:
            state = read_state(self.path)
        except CorruptState as exc:
            return f"the state file {exc.path} {exc.problem}: this full run replaces it"
        if state is None:
            legacy = legacy_state(self.path)
            if legacy is not None:
                return f"the state file {legacy} is of an older format: this full run replaces it"
            return f"first run: no validation state stored at {self.path}"
        current = fingerprint_parts(self.plan, state.scheme)
        differ = differing_parts(dict(state.fingerprint), current)
        if differ:
            return f"the stored state is of another configuration ({', '.join(differ)} differ)"
        if _span(fresh, state.scheme) > MAX_GROWTH * _span(state.scheme, state.scheme):
            return "the keys outgrew the stored leaves' range: leaves planned again"
        paths = (self.table.changelog_at, self.table.mirror_at)
        stored_marks = (state.changelog, state.mirror)
        for path, stored, now in zip(paths, stored_marks, self.marks, strict=True):
            why = why_not_carried(path, stored, now)
            if why:
                return why
        self.state, self.scheme = state, state.scheme
        return None

    def leaves_to_rehash(self, positions: SourcePositions | None) -> frozenset[int] | None:
        """The leaves to re-hash at ``positions`` (P1); None: every leaf (a full run)."""
        state = self.state
        if state is None or not isinstance(self.scheme, RangeLeaves):
            return None
        self.state = None  # until it proves usable at P1
        if positions is None:
            self.reason = "the source gave no log position to compare the stored one with"
            return None
        low, high = min(positions.values), max(positions.values)
        if state.high > low:
            self.reason = (
                f"the stored state holds for position {state.position_text}, not at or below"
                f" this run's {positions.describe()} (another position lineage)"
            )
            return None
        changed = changed_leaves(
            self.table.changelog_at, self.key, self.scheme, state.changelog, state.low, high
        )
        if changed is None:
            self.reason = "the changelog holds a truncate since the stored position"
            return None
        changed |= state.differing_leaves()
        self.state, self.changed = state, len(changed)
        share, parts = self.settings.sweep_share, source_stripes(self.scheme, self.plan.parallelism)
        self.sweep = next_sweep(self.scheme.count, share, parts, state.sweep_cursor)
        self.rehash = frozenset(changed | set(self.sweep.leaves))
        log.info(
            "comparison %s: incremental from %s: %d changed leaves, %d swept of %d",
            self.plan.comparison.name,
            state.position_text,
            len(changed),
            len(self.sweep.leaves),
            self.scheme.count,
        )
        return self.rehash

    def merged(self, fresh: Sides) -> Stored | None:
        """Both sides' digests: the re-hashed leaves' fresh, the others' stored (None: no
        state is kept for this comparison)."""
        if not self.active:
            return None
        count = self.scheme.count
        if self.state is None or self.rehash is None:
            return StoredDigests.of(fresh[0], count), StoredDigests.of(fresh[1], count)
        stored = (self.state.source, self.state.lake)
        source, lake = (s.replaced(self.rehash, f) for s, f in zip(stored, fresh, strict=True))
        return source, lake

    def finish(self, digests: Stored | None, positions: SourcePositions | None) -> Coverage | None:
        """Store the run's state (when it can be) and say what the run proves (None: no
        state is kept for this comparison)."""
        if not self.active or digests is None:
            return None
        coverage = self._coverage(positions.describe() if positions else None)
        if isinstance(self.scheme, RangeLeaves) and positions is not None:
            try:
                self._store(digests, positions)
            except OSError as exc:  # the comparison stands; the next run is full
                log.warning("comparison %s: state not stored: %s", self.plan.comparison.name, exc)
                unstored = f"the state could not be stored ({exc}): the next run is full"
                reason = f"{coverage.reason}; {unstored}" if coverage.reason else unstored
                return replace(coverage, reason=reason)
        return coverage

    def _coverage(self, to: str | None) -> Coverage:
        count = self.scheme.count
        if self.state is None or self.sweep is None or self.rehash is None:
            return full_coverage(to, count, self.reason)
        share, parts = self.settings.sweep_share, source_stripes(self.scheme, self.plan.parallelism)
        cursor = self.sweep.next_cursor
        runs = (sweep_runs(count, share, parts), runs_until_swept(count, share, parts, cursor))
        return incremental_coverage(
            (self.state.position_text, to or ""),
            self.changed,
            len(self.rehash) - self.changed,
            count - len(self.rehash),
            runs,
        )

    def _store(self, digests: Stored, positions: SourcePositions) -> None:
        assert isinstance(self.scheme, RangeLeaves)
        changelog, mirror = self.marks
        if changelog is None:  # the lake table appeared while the run waited for it
            return
        cursor = 0 if self.sweep is None or self.state is None else self.sweep.next_cursor
        state = ValidationState(
            fingerprint=fingerprint_parts(self.plan, self.scheme),
            scheme=self.scheme,
            low=min(positions.values),
            high=max(positions.values),
            position_text=positions.describe(),
            changelog=changelog,
            mirror=mirror,
            sweep_cursor=cursor,
            source=digests[0],
            lake=digests[1],
        )
        write_state(self.path, state)
