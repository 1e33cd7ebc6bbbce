"""A comparison runs again when the CDC pipeline moves its lake table aside under it
(``validator.reloads``): postgres-full seeds 408 and 488 of the catalog soak failed with
``TableNotFoundError`` when a validation read a table the pipeline was loading again."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core.lake.layout import ChangelogMoved, LakeTable
from validator.reloads import ATTEMPTS, through_reloads


def _table(lake: Path) -> LakeTable:
    table = LakeTable(lake, "shop.t")
    (table.changelog / "_delta_log").mkdir(parents=True)
    return table


def _reload(table: LakeTable) -> None:
    """What ``LakeSink.retire_table`` and the new load do to the table's folder."""
    retired = table.lake / "_replcheck" / "retired" / "p"
    retired.mkdir(parents=True, exist_ok=True)
    table.root.rename(retired / f"shop-t@{len(list(retired.iterdir()))}")
    (table.changelog / "_delta_log").mkdir(parents=True)


def test_a_comparison_whose_table_was_moved_aside_runs_again(tmp_path: Path) -> None:
    table = _table(tmp_path)
    calls: list[int] = []

    def compare() -> str:
        calls.append(1)
        if len(calls) == 1:
            _reload(table)
            raise OSError("No files in log segment")  # as deltalake says it
        return "compared"

    assert through_reloads(compare, table) == "compared"
    assert len(calls) == 2


def test_a_failure_while_the_table_stayed_is_the_comparisons_own(tmp_path: Path) -> None:
    table = _table(tmp_path)
    calls: list[int] = []

    def compare() -> str:
        calls.append(1)
        raise OSError("No files in log segment")

    with pytest.raises(OSError, match="log segment"):
        through_reloads(compare, table)
    assert len(calls) == 1


def test_a_table_moved_under_every_attempt_fails_after_the_last(tmp_path: Path) -> None:
    table = _table(tmp_path)
    calls: list[int] = []

    def compare() -> str:
        calls.append(1)
        _reload(table)
        raise ValueError("a file is gone")

    with pytest.raises(ValueError, match="a file is gone"):
        through_reloads(compare, table)
    assert len(calls) == ATTEMPTS


def test_a_changelog_moved_error_runs_the_comparison_again(tmp_path: Path) -> None:
    table = _table(tmp_path)
    results = iter([ChangelogMoved.of(table), "compared"])

    def compare() -> str:
        result = next(results)
        if isinstance(result, Exception):
            raise result
        return result

    assert through_reloads(compare, table) == "compared"


def test_a_database_target_runs_once() -> None:
    calls: list[int] = []

    def compare() -> str:
        calls.append(1)
        raise OSError("gone")

    with pytest.raises(OSError):
        through_reloads(compare, None)
    assert len(calls) == 1
