"""``replcheck resync``: run a re-sync from a result file and write its outputs.

Writes ``DIR/resync.json`` (the outcome) and ``DIR/resync-report.html`` (the result's HTML
report with what was repaired or proposed under each comparison); repair SQL files of dry
runs go to the same directory, which defaults to the result's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from cdc_core.files import check_output_dir, write_atomic
from reports.html import build_html_report
from reports.model import read_result
from validator.config import load_validator_config
from validator.engines.sides.spark.session import LazySparkSession
from validator.resync.outcome import Mode, ResyncOutcome
from validator.resync.run import resync


@dataclass(frozen=True, slots=True)
class ResyncFiles:
    """Where a re-sync's outputs went."""

    outcome: Path
    html: Path


@dataclass(frozen=True, slots=True)
class ResyncArguments:
    """The command's flags."""

    config: Path
    result: Path
    comparisons: Sequence[str] = ()
    apply: bool = False
    force: bool = False
    max_rows: int | None = None
    full_revalidation: bool = False
    out: Path | None = None
    overrides: Mapping[str, str] | None = None
    verbose: bool = False  # show Spark's log (replcheck --verbose)


def run_resync(arguments: ResyncArguments) -> tuple[ResyncOutcome, ResyncFiles]:
    """Load the config and the result, re-sync, and write resync.json and the report."""
    config = load_validator_config(arguments.config, arguments.overrides)
    document = read_result(arguments.result)
    out_dir = arguments.out or arguments.result.parent
    check_output_dir(out_dir, "--out")
    outcome = resync(
        config,
        document,
        comparisons=arguments.comparisons,
        apply=arguments.apply,
        force=arguments.force,
        max_rows=arguments.max_rows,
        full_revalidation=arguments.full_revalidation,
        out_dir=out_dir,
        spark=LazySparkSession.for_config(config.spark, arguments.verbose),
        result_file=arguments.result,
    )
    return outcome, write_resync_outputs(document, outcome, out_dir)


def write_resync_outputs(
    document: dict[str, object], outcome: ResyncOutcome, out_dir: Path
) -> ResyncFiles:
    """Write ``resync.json`` and ``resync-report.html`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = outcome.to_dict()
    path = out_dir / "resync.json"
    write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    html = out_dir / "resync-report.html"
    write_atomic(html, build_html_report(document, resync=data))
    return ResyncFiles(path, html)


def summary_lines(outcome: ResyncOutcome) -> list[str]:
    """One line per comparison, for the terminal."""
    lines = []
    for comparison in outcome.comparisons:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(comparison.action_counts.items()))
        if comparison.error is not None:
            verdict = f"FAILED: {comparison.error}"
        elif comparison.not_found:
            verdict = (
                f"{comparison.not_found} of {comparison.requested} key(s) of the result found on"
                " neither side, nothing done for them: is the result of this source and"
                " target? (or the rows were deleted at both since)"
            )
        elif comparison.sql_file is not None:
            verdict = f"repair SQL written to {comparison.sql_file} (nothing applied)"
        elif comparison.mode is Mode.DRY_RUN:
            verdict = "dry run: nothing written (the outcome lists the keys); --apply writes"
        elif comparison.repaired:
            verdict = "every difference is gone"
        else:
            verdict = f"{comparison.remaining_total} difference(s) remain"
        skipped = ", ".join(f"{k} {v}" for k, v in comparison.skipped.items())
        lines.append(
            f"{comparison.name:<24} {comparison.mode.value:<10} {counts or 'no repairs'}"
            f"{f'; skipped {skipped}' if skipped else ''}; {verdict}"
        )
    return lines
