"""Write a run's outputs: result.json (the source of truth) and the renderings of it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_core.files import check_output_dir, check_output_file, write_atomic
from cdc_core.lake_location import LakeLocation
from reports.history import history_for, record_run
from reports.html import build_html_report
from reports.junit import build_junit
from reports.markdown import build_markdown
from validator.key_masks import KeyMasker


@dataclass(frozen=True, slots=True)
class Outputs:
    """Where a run's files went (``junit`` and ``markdown`` None when not asked for)."""

    result: Path
    html: Path
    junit: Path | None = None
    markdown: Path | None = None

    def lines(self) -> list[str]:
        """One ``what: path`` line per file written, for the terminal."""
        written = (
            ("result", self.result),
            ("report", self.html),
            ("junit", self.junit),
            ("markdown", self.markdown),
        )
        return [f"{what}: {path}" for what, path in written if path is not None]


def write_outputs(
    document: dict[str, Any],
    out_dir: Path,
    junit: Path | None = None,
    lake: Path | LakeLocation | None = None,
    masker: KeyMasker | None = None,
    markdown: Path | None = None,
) -> Outputs:
    """Write result.json (and the run's ``mask.key`` if ``masker`` made one up), record the
    run in the history (the lake's, else a file beside ``out_dir``) and write report.html
    with the trend, and JUnit XML and the Markdown summary if asked."""
    out_dir.mkdir(parents=True, exist_ok=True)
    result = out_dir / "result.json"
    write_atomic(result, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    if masker is not None:
        masker.save_beside(result)
    history = record_run(history_for(lake, out_dir), document)
    html = out_dir / "report.html"
    write_atomic(html, build_html_report(document, history))
    if junit is not None:
        write_atomic(junit, build_junit(document))
    if markdown is not None:
        write_atomic(markdown, render_markdown(document))
    return Outputs(result, html, junit, markdown)


def check_outputs(
    out_dir: Path,
    junit: Path | None = None,
    option: str = "--out",
    markdown: Path | None = None,
) -> None:
    """Fail now, not after the validation, when an output cannot be written."""
    check_output_dir(out_dir, option)
    if junit is not None:
        check_output_file(junit, "--junit")
    if markdown is not None:
        check_output_file(markdown, "--markdown")


def render_markdown(document: dict[str, Any]) -> str:
    """The Markdown summary of a run."""
    return build_markdown(document)
