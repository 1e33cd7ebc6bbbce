"""The demo the command asked for: SQLite with trigger capture (embedded, the default),
DuckDB (embedded, a prepared lake) or a private MariaDB."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from validator.demo.setup import DemoSetup, DemoSource


@contextlib.contextmanager
def demo_source(
    source: DemoSource, workdir: Path, echo: Callable[[str], None]
) -> Iterator[DemoSetup]:
    """Build the chosen demo under ``workdir``; its source stays up until the block ends."""
    if source is DemoSource.MARIADB:
        from validator.demo.mariadb import mariadb_demo

        with mariadb_demo(workdir, echo) as setup:
            yield setup
    elif source is DemoSource.SQLITE:
        from validator.demo.sqlite import sqlite_demo

        with sqlite_demo(workdir, echo) as setup:
            yield setup
    else:
        from validator.demo.duckdb import build_demo

        yield build_demo(workdir)
