"""The validation result model; ``result.json`` is its serialised form (the source of truth).

Differences are a small union of frozen types. Keys and values are carried as display
text (never raw objects) so the result serialises losslessly to JSON; values of sensitive
columns are replaced by ``MASK`` before they ever reach this model.

A comparison counts two sorts of difference, in one vocabulary of kinds:

- Row differences (``differences``): ``differences_total`` rows, by kind in
  ``counts_by_kind`` (``missing_in_target``, ``extra_in_target``, ``changed``,
  ``duplicate_key``); beyond ``max_reported_rows`` they are counted but not detailed. These
  two fields count rows only: re-sync and the reports' "more not shown" rely on it.
- Schema differences (``schema_differences``): columns of the comparison's tables that could
  not be compared, each of kind ``missing_in_target``, ``extra_in_target`` or ``changed``
  (types that cannot be compared). Every one is detailed, so their count is their number;
  a column ``columns.exclude`` names is never one.

Either sort makes a comparison ``differences`` (exit code 1); ``replcheck gate`` holds their
sum (``reports.model.total_differences``) against ``--max-differences``. Results written
before schema differences had a kind are read with it taken from ``problem``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from enum import StrEnum
from typing import Any

MASK = "***"
TOKEN_PREFIX = MASK + "#"  # a sensitive key part: MASK and a keyed hash (validator.key_masks)
SCHEMA_VERSION = 1


class Status(StrEnum):
    """Outcome of a comparison or a run; exit codes 0, 1, 2 in that order."""

    IN_SYNC = "in_sync"
    DIFFERENCES = "differences"
    ERROR = "error"

    @property
    def exit_code(self) -> int:
        """The CLI's exit code for this status."""
        return {"in_sync": 0, "differences": 1, "error": 2}[self.value]


Key = tuple[str | None, ...]
"""A row key as display text, in key-column order (None for a NULL key part)."""

KeyPartOrder = tuple[int, int | float | Decimal, str]


def key_order(values: Sequence[Any]) -> tuple[KeyPartOrder, ...]:
    """The sort key under which differing keys are reported: a key's typed values (as the
    readers return them, before they become display text) column by column; in a column
    NULL first, then numbers numerically (1, 2, 10, not 1, 10, 2 as their text sorts), then
    every other value by its text (dates and times in time order, text as text).

    Engines sort by it before they cut the keys to ``max_reported_rows``, so every report
    lists the same first keys in the same order, whichever engine compared.
    """
    return tuple(_part_order(value) for value in values)


def _part_order(value: Any) -> KeyPartOrder:
    if value is None:
        return (0, 0, "")
    if _is_number(value):
        return (1, value, "")
    if isinstance(value, bytes | bytearray | memoryview):
        return (2, 0, bytes(value).hex())
    return (2, 0, str(value))


def _is_number(value: Any) -> bool:
    """A number that orders among numbers: a NaN has no place there (and a Decimal NaN
    refuses to be compared at all), so it sorts by its text."""
    if isinstance(value, Decimal):
        return not value.is_nan()
    return isinstance(value, int | float) and not math.isnan(value)


@dataclass(frozen=True, slots=True)
class MissingInTarget:
    """A key the source has and the target lacks; ``rows`` of it, more than one only for
    equal rows of a table without a key (``RowLayout.whole_row_key``)."""

    key: Key
    kind: str = "missing_in_target"
    rows: int = 1


@dataclass(frozen=True, slots=True)
class ExtraInTarget:
    """A key the target has and the source lacks; ``rows`` of it (as above)."""

    key: Key
    kind: str = "extra_in_target"
    rows: int = 1


@dataclass(frozen=True, slots=True)
class ColumnChange:
    """One column whose canonical value differs; values are display text or ``MASK``."""

    column: str
    source: str | None
    target: str | None


@dataclass(frozen=True, slots=True)
class Changed:
    """A key present on both sides whose rows differ in ``columns``."""

    key: Key
    columns: tuple[ColumnChange, ...]
    kind: str = "changed"


@dataclass(frozen=True, slots=True)
class DuplicateKey:
    """A key that occurs more than once on one side (reported, never merged)."""

    key: Key
    side: str
    count: int
    kind: str = "duplicate_key"

    def __post_init__(self) -> None:
        if self.side not in ("source", "target") or self.count < 2:
            raise ValueError(f"invalid duplicate key report ({self.side}, {self.count})")


Difference = MissingInTarget | ExtraInTarget | Changed | DuplicateKey


def rows_of(difference: Difference) -> int:
    """How many differences one detailed difference counts for."""
    return difference.rows if isinstance(difference, MissingInTarget | ExtraInTarget) else 1


SCHEMA_KINDS = ("missing_in_target", "extra_in_target", "changed")
"""Kinds of schema difference: a source column the target lacks, a target column the source
lacks, a column both have as types that cannot be compared."""


@dataclass(frozen=True, slots=True)
class SchemaDifference:
    """A column that is missing on one side or whose types cannot be compared (``kind``, one
    of ``SCHEMA_KINDS``); ``problem`` says what is wrong, in words."""

    column: str
    problem: str
    kind: str

    def __post_init__(self) -> None:
        if self.kind not in SCHEMA_KINDS:
            raise ValueError(f"schema difference kind must be one of {SCHEMA_KINDS}")


LAKE_FINDING_KINDS = ("foreign_commit", "changed_file", "unpaired_history")


@dataclass(frozen=True, slots=True)
class LakeFinding:
    """A finding of the lake's self-consistency check (``cdc_core.lake.mirror_state.audit_lake``),
    separate from the comparison: a commit no replcheck writer made, a data file that no
    longer matches its Delta entry, or a changelog and mirror not written in step. It never
    changes the comparison's status (the mirror users read is what is compared); ``detail``
    names the Delta table, the version or file, the writer, and the way out."""

    kind: str
    detail: str

    def __post_init__(self) -> None:
        if self.kind not in LAKE_FINDING_KINDS:
            raise ValueError(f"lake finding kind must be one of {LAKE_FINDING_KINDS}")


@dataclass(frozen=True, slots=True)
class ExpectationResult:
    """One data-quality expectation checked on the target (``validator.expectations``).

    Attributes:
        kind: The configured kind (``validator.config.EXPECTATION_KINDS``).
        expectation: Great Expectations' name for it, e.g. ``expect_column_values_to_be_unique``.
        columns: The target columns it checks (none for the row count).
        description: What was expected, in words.
        success: True when the target met it.
        observed_value: Table-level expectations: what was observed (display text).
        element_count: Column expectations: rows checked.
        unexpected_count: Column expectations: rows that broke it.
        unexpected_percent: Column expectations: their share of the non-NULL rows, in %.
        unexpected_sample: A few distinct values that broke it (display text, or ``MASK``
            when a column is sensitive).
        error: Why it could not be evaluated (then ``success`` is False).
    """

    kind: str
    expectation: str
    columns: tuple[str, ...]
    description: str
    success: bool
    observed_value: str | None = None
    element_count: int | None = None
    unexpected_count: int | None = None
    unexpected_percent: float | None = None
    unexpected_sample: tuple[str | None, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Coverage:
    """Which leaves a run re-hashed on both sides, and what that proves
    (``validator.incremental``).

    Attributes:
        mode: ``full`` (every leaf re-hashed) or ``incremental`` (stored digests reused).
        reason: Why a run asked to be incremental was full, or why its state could not be
            stored (None: neither).
        from_position: P0, the position the reused digests hold for (incremental runs).
        to_position: P1, the position this run compared at.
        leaves_changed: Leaves re-hashed because the lake's changelog shows changes in them
            since P0 (or because they differed at P0).
        leaves_swept: Other leaves re-hashed from scratch by the rotating sweep.
        leaves_reused: Leaves whose digests were taken from the state stored at P0.
        sweep_runs: Every leaf is swept within this many incremental runs.
        runs_until_swept: Incremental runs until every leaf has been swept since the last
            full run or sweep cycle (0: every leaf has been).
        guarantee: What this run proves and what it cannot see, in words.
    """

    mode: str
    reason: str | None = None
    from_position: str | None = None
    to_position: str | None = None
    leaves_changed: int = 0
    leaves_swept: int = 0
    leaves_reused: int = 0
    sweep_runs: int = 0
    runs_until_swept: int = 0
    guarantee: str = ""

    def __post_init__(self) -> None:
        if self.mode not in ("full", "incremental"):
            raise ValueError(f"coverage mode must be full or incremental, not {self.mode!r}")

    @property
    def leaves_rehashed(self) -> int:
        """Leaves re-hashed on both sides this run (changed and swept)."""
        return self.leaves_changed + self.leaves_swept

    def summary(self) -> str:
        """What the run checked, in one phrase for the terminal: ``full run`` (and why, when
        asked to be incremental), or how many leaves were re-hashed and when the sweep has
        covered every leaf."""
        if self.mode == "full":
            return f"full run ({self.reason})" if self.reason else "full run"
        leaves = self.leaves_rehashed + self.leaves_reused
        left = self.runs_until_swept
        swept = (
            f"every leaf swept within {left} more incremental run{'s' if left > 1 else ''}"
            if left
            else "this run completed a sweep of every leaf"
        )
        return f"{self.leaves_rehashed} of {leaves} leaves re-hashed; {swept}"


@dataclass(frozen=True, slots=True)
class ComparisonResult:
    """The outcome of one comparison."""

    name: str
    status: Status
    source: str
    target: str
    source_rows: int = 0
    target_rows: int = 0
    source_position: str | None = None
    target_position: str | None = None
    depth: int = 0
    leaves_compared: int = 0
    leaves_mismatched: int = 0
    mismatched_leaves: Mapping[int, int] = field(default_factory=dict)  # leaf -> differing rows
    differences: tuple[Difference, ...] = ()
    differences_total: int = 0
    counts_by_kind: Mapping[str, int] = field(default_factory=dict)
    schema_differences: tuple[SchemaDifference, ...] = ()
    in_flight: tuple[Key, ...] = ()  # live targets: keys still changing when re-checked
    expectations: tuple[ExpectationResult, ...] = ()  # data-quality suite on the target
    timings: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None
    engine: str = "spark"  # who computed the digests: Spark, or the two databases
    engine_reason: str | None = None  # why that engine (validator.plan; None: not planned)
    coverage: Coverage | None = None  # full or incremental (None: no state kept)
    lake_findings: tuple[LakeFinding, ...] = ()  # a lake target's self-consistency check

    @property
    def differences_omitted(self) -> int:
        """Differences counted but not detailed (beyond ``max_reported_rows``)."""
        return self.differences_total - sum(rows_of(d) for d in self.differences)

    @property
    def expectations_failed(self) -> int:
        """Expectations the target did not meet."""
        return sum(1 for expectation in self.expectations if not expectation.success)


def with_expectations(
    result: ComparisonResult, expectations: tuple[ExpectationResult, ...], seconds: float
) -> ComparisonResult:
    """``result`` with its checked expectations and their time; a failed expectation makes an
    in-sync comparison fail (exit code 1) exactly as a difference would."""
    checked = replace(
        result,
        expectations=expectations,
        timings={**result.timings, "expectations": round(seconds, 3)},
    )
    if checked.status is Status.IN_SYNC and checked.expectations_failed:
        return replace(checked, status=Status.DIFFERENCES)
    return checked


def with_schema_differences(
    result: ComparisonResult, schema_differences: tuple[SchemaDifference, ...]
) -> ComparisonResult:
    """``result`` with the columns it could not compare; any makes an in-sync comparison
    differ (exit code 1), as a row difference would (an error stays an error)."""
    marked = replace(result, schema_differences=schema_differences)
    if marked.status is Status.IN_SYNC and schema_differences:
        return replace(marked, status=Status.DIFFERENCES)
    return marked


def to_dict(value: Any) -> Any:
    """Plain JSON-ready form of any result object (dataclasses, enums, tuples, mappings)."""
    if isinstance(value, StrEnum):
        return value.value
    if hasattr(value, "__dataclass_fields__"):
        data = {name: to_dict(getattr(value, name)) for name in value.__dataclass_fields__}
        if isinstance(value, ComparisonResult):
            data["mismatched_leaves"] = {str(k): v for k, v in value.mismatched_leaves.items()}
        if isinstance(value, MissingInTarget | ExtraInTarget) and value.rows == 1:
            del data["rows"]  # said only of the equal rows of a table without a key
        return data
    if isinstance(value, Mapping):
        return {str(k): to_dict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_dict(item) for item in value]
    return value


def overall_status(statuses: list[Status]) -> Status:
    """A run is an error if any comparison errored, else differences if any differ."""
    if Status.ERROR in statuses:
        return Status.ERROR
    return Status.DIFFERENCES if Status.DIFFERENCES in statuses else Status.IN_SYNC
