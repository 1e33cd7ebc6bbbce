"""What every demo hands the command: where its config is, what drift it injected, and how
to tell what a validation found."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Row = dict[str, Any]
Expected = set[tuple[str, str, tuple[str, ...]]]  # (comparison, kind, key)


@dataclass(frozen=True, slots=True)
class DemoSetup:
    """Where the demo put things, and the differences it injected."""

    config: Path
    expected: Expected
    repairs: bool = False  # the demo re-syncs what it found, then validates again


def found_differences(document: dict[str, Any]) -> Expected:
    """(comparison, kind, key) of every detailed difference in a result document."""
    return {
        (c["name"], d["kind"], tuple(d["key"]))
        for c in document["comparisons"]
        for d in c["differences"]
    }


class DemoSource(enum.StrEnum):
    """Where the demo's source data lives."""

    SQLITE = "sqlite"  # an embedded SQLite file with trigger capture: the whole loop
    DUCKDB = "duckdb"  # an embedded DuckDB file and a lake copy written directly
    MARIADB = "mariadb"  # a private MariaDB server, replicated by the real CDC pipeline
