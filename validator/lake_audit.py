"""The lake's self-consistency check, as findings of a comparison with a lake target.

A separate check from the comparison: the comparison reads the mirror users read, whatever
wrote it (``cdc_core.lake.mirror_state``); this names what made the lake's two Delta tables
disagree with the pipeline's record, so the reader knows *why* a difference is there, or
that a change not made by the pipeline is there although the copy still equals its source.
"""

from __future__ import annotations

import logging

from cdc_core.lake.layout import LakeTable
from cdc_core.lake.mirror_state import LakeAudit, audit_lake
from validator.result import LakeFinding

log = logging.getLogger(__name__)

WAY_OUT = (
    "run `replcheck resync` on this comparison's result to rewrite the differing rows from"
    " the source, or load the table again from a new snapshot"
)


def lake_findings(table: LakeTable) -> tuple[LakeFinding, ...]:
    """The findings of ``table``'s audit, each logged as a warning naming it."""
    findings = to_findings(table.table, audit_lake(table))
    for finding in findings:
        log.warning("lake table %s: %s", table.table, finding.detail)
    return findings


def to_findings(table: str, audit: LakeAudit) -> tuple[LakeFinding, ...]:
    """The audit in the words of a result."""
    found = [
        LakeFinding(
            "foreign_commit",
            f"version {c.version} of the {c.table} of {table} ({c.operation}, written by"
            f" {c.writer}) was not written by replcheck: the {c.table} was changed behind the"
            f" pipeline's back; if the comparison found differences, {WAY_OUT}",
        )
        for c in audit.foreign
    ]
    found += [
        LakeFinding(
            "changed_file",
            f"data file {f.path} of the {f.table} of {table} {f.problem}: it was replaced"
            f" or damaged without a Delta commit; the pipeline rebuilds the mirror from its"
            f" changelog at its next write to the table, or {WAY_OUT}",
        )
        for f in audit.changed
    ]
    if audit.unpaired is not None:
        found.append(
            LakeFinding(
                "unpaired_history", f"the changelog and mirror of {table}: {audit.unpaired}"
            )
        )
    return tuple(found)
