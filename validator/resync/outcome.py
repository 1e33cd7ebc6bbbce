"""What a re-sync did and whether it worked; ``resync.json`` is its serialised form.

Keys are display text (masked for sensitive key columns) and actions carry column names,
never values, so the outcome can be kept and shown like a result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from validator.result import Difference, Key, to_dict

RESYNC_SCHEMA_VERSION = 1


class Mode(StrEnum):
    """How the repairs of a comparison were carried out."""

    REFRESHED = "refreshed"  # lake target: refresh and delete events written
    APPLIED = "applied"  # database target: repair SQL executed
    DRY_RUN = "dry_run"  # nothing written (no --apply): the actions say what would be;
    # database targets: the repair SQL also written to a file for review
    NOTHING = "nothing"  # no differing key to repair
    FAILED = "failed"  # the comparison could not be re-synced (see ``error``)


class Revalidation(StrEnum):
    """How the repaired comparison was checked afterwards."""

    KEYS = "keys"  # the repaired keys, read on both sides and hashed
    FULL = "full"  # the whole comparison validated again
    NONE = "none"  # not checked (dry run, failure)


@dataclass(frozen=True, slots=True)
class ActionTaken:
    """One repair, as reviewers see it.

    Attributes:
        kind: ``insert``, ``update``, ``delete`` (database) or ``refresh`` / ``delete``
            (lake events).
        key: The key as display text (masked parts for sensitive key columns).
        columns: The columns an update sets (target names); empty otherwise.
    """

    kind: str
    key: Key
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ComparisonResync:
    """The re-sync of one comparison.

    Attributes:
        name: The comparison.
        target: The target, for display (no secrets).
        mode: How the repairs were carried out.
        requested: Differing keys taken from the result.
        actions: The repairs done, or in a dry run proposed (a lake's: the keys to refresh
            and to delete).
        unchanged: Keys found equal when re-read (nothing to do).
        not_found: Keys found on neither side: nothing was repaired for them, and the run
            is no success (a result of other tables or rows, or rows deleted since).
        skipped: Findings a re-sync cannot repair, by reason (e.g. duplicate keys).
        source_position: The source position the repairs were read at.
        sql_file: The repair SQL file (database targets).
        revalidation: How the repair was checked.
        remaining: Differences still found by the check.
        remaining_total: Their number (a full validation may detail fewer).
        in_flight: Live targets: keys still changing when re-checked (not drift).
        error: Why the comparison could not be re-synced.
    """

    name: str
    target: str
    mode: Mode
    requested: int = 0
    actions: tuple[ActionTaken, ...] = ()
    unchanged: int = 0
    not_found: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    source_position: str | None = None
    sql_file: str | None = None
    revalidation: Revalidation = Revalidation.NONE
    remaining: tuple[Difference, ...] = ()
    remaining_total: int = 0
    in_flight: tuple[Key, ...] = ()
    error: str | None = None

    @property
    def action_counts(self) -> dict[str, int]:
        """Repairs per kind."""
        counts: dict[str, int] = {}
        for action in self.actions:
            counts[action.kind] = counts.get(action.kind, 0) + 1
        return counts

    @property
    def repaired(self) -> bool:
        """True when the check found every difference gone: a full re-validation found
        none, or the repaired keys are all equal and nothing was skipped."""
        if self.error is not None or self.not_found:
            return False
        if self.revalidation is Revalidation.FULL:  # covers findings a key re-sync skipped
            return self.remaining_total == 0
        if self.skipped:
            return False
        checked = self.revalidation is Revalidation.KEYS and self.remaining_total == 0
        return checked or self.mode is Mode.NOTHING

    @property
    def exit_code(self) -> int:
        """0 repaired (or a dry run said what it would do), 1 differences remain, 2 failed."""
        if self.error is not None or (self.requested and self.not_found == self.requested):
            return 2  # nothing the result names is there: it is not this data's result
        if (self.mode is Mode.DRY_RUN and not self.not_found) or self.repaired:
            return 0
        return 1


@dataclass(frozen=True, slots=True)
class ResyncOutcome:
    """A whole re-sync run.

    Attributes:
        started: When it started (ISO 8601, UTC).
        finished: When it finished.
        user: Who ran it (the OS user).
        result_finished: When the validation it repairs finished.
        comparisons: Per comparison, what was done.
        full_revalidation: Per comparison re-validated fully, the new comparison result.
    """

    started: str
    finished: str
    user: str
    result_finished: str
    comparisons: tuple[ComparisonResync, ...]
    full_revalidation: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """The worst of the comparisons' exit codes (0 when there was nothing to do)."""
        return max((c.exit_code for c in self.comparisons), default=0)

    def to_dict(self) -> dict[str, Any]:
        """The ``resync.json`` document."""
        return {
            "schema_version": RESYNC_SCHEMA_VERSION,
            "started": self.started,
            "finished": self.finished,
            "user": self.user,
            "result_finished": self.result_finished,
            "exit_code": self.exit_code,
            "comparisons": [_comparison_dict(c) for c in self.comparisons],
            "full_revalidation": dict(self.full_revalidation),
        }


def _comparison_dict(comparison: ComparisonResync) -> dict[str, Any]:
    data: dict[str, Any] = to_dict(comparison)
    data["action_counts"] = comparison.action_counts
    data["repaired"] = comparison.repaired
    return data
