"""SQLite as a CDC source, by trigger capture (SQLite has no log a reader can follow).

Registered under the ``sqlite`` URL scheme: a pipeline's source ``sqlite:///path/file.db``
reads the logging tables ``replcheck cdc install-capture`` set up
(``connectors/sqlite/trigger_dialect.py``). Tables are named as in the file's ``main``
schema (``orders`` or ``main.orders``).
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc_core.errors import ConfigError
from cdc_core.names import is_glob
from connectors.base import file_path
from connectors.model import LogSource
from connectors.registry import register_log_source
from connectors.sqlite.trigger_dialect import SQLiteTriggerDialect
from connectors.trigger_capture.log_reader import TriggerLogReader, TriggerReaderConfig


def capture_dialect(url: str, tables: Sequence[str]) -> SQLiteTriggerDialect:
    """The trigger capture of ``tables`` of an ``sqlite`` URL.

    Raises:
        ConfigError: A glob among the tables (trigger capture is set up per table).
    """
    globs = [table for table in tables if is_glob(table)]
    if globs or not tables:
        raise ConfigError(
            f"SQLite trigger capture needs its tables listed by name, not {globs or 'none'}"
        )
    return SQLiteTriggerDialect(file_path(url, "sqlite", "SQLite", "path/file.db"), tables)


def open_source(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """The trigger capture reader and snapshot reader of an ``sqlite`` URL."""
    dialect = capture_dialect(url, tables)
    reader = TriggerLogReader(dialect, TriggerReaderConfig(tuple(tables)))
    return LogSource(reader, dialect.snapshots(tables), dialect.table_names, tuple(tables))


register_log_source(("sqlite",), open_source)
