"""The demo the command asked for: SQLite with trigger capture (embedded, the default,
validated in DuckDB), DuckDB (embedded, a prepared lake, validated in Spark) or a private
MariaDB (validated by the server and DuckDB)."""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path

from cdc_core.drivers import missing_driver
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
        # This demo shows the Spark engine (the source computes no digests, and its config
        # does not ask for the local engine): without pyspark it cannot run, so it says
        # which extra to install (exit 2) before writing anything.
        if importlib.util.find_spec("pyspark") is None:
            raise missing_driver("pyspark", "replcheck demo --source duckdb")
        from validator.demo.duckdb import build_demo

        yield build_demo(workdir)
