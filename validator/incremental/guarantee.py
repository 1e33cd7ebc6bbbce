"""What a run proves, in the words the result and the reports print."""

from __future__ import annotations

from dataclasses import replace

from validator.result import Coverage

UNSEEN = (
    "It cannot see, until its leaf is swept: a change made at the source without a log"
    " record, or a mirror data file replaced without a Delta commit (commits not written by"
    " the pipeline are detected from Delta's log and make a full run)."
)


def full_coverage(to_position: str | None, leaves: int, reason: str | None) -> Coverage:
    """A run that re-hashed every leaf on both sides."""
    at = f" at position {to_position}" if to_position else ""
    return Coverage(
        mode="full",
        reason=reason,
        to_position=to_position,
        leaves_swept=leaves,
        guarantee=(
            f"Full run: all {leaves} leaves were re-hashed on both sides{at}; the comparison"
            " proves that every row and compared column of the lake's mirror, the table users"
            " read, equals the source there, whatever wrote either side."
        ),
    )


def incremental_coverage(
    span: tuple[str, str], changed: int, swept: int, reused: int, runs: tuple[int, int]
) -> Coverage:
    """A run that re-hashed ``changed`` + ``swept`` leaves and reused ``reused``; ``span``
    is (P0, P1), ``runs`` (runs a sweep cycle takes, runs until this one ends)."""
    (p0, p1), (cycle, left) = span, runs
    return Coverage(
        mode="incremental",
        from_position=p0,
        to_position=p1,
        leaves_changed=changed,
        leaves_swept=swept,
        leaves_reused=reused,
        sweep_runs=cycle,
        runs_until_swept=left,
        guarantee=(
            f"Incremental run from {p0} to {p1}: it proves the pipeline's changes since {p0}"
            f" are correct ({changed} leaves the changelog shows changed, or that differed"
            f" last run, re-hashed on both sides) and the {swept} swept leaves are correct;"
            f" {reused} leaves reuse digests stored at {p0}. {UNSEEN} Every leaf is swept"
            f" within {cycle} incremental runs ({left} more until this cycle has swept every"
            " leaf)."
        ),
    )


def stateless_coverage(to_position: str | None, leaves: int, reason: str) -> Coverage:
    """A full run asked to keep validation state by an engine that keeps none (spark,
    database); ``reason`` says why it could not."""
    full = full_coverage(to_position, leaves, reason)
    said = " No digests were stored: the next run is full too."
    return replace(full, guarantee=full.guarantee.replace("the lake's mirror", "the target") + said)
