"""A trigger capture as a pipeline's source: the reader over a product's logging tables and
its snapshot reader (``connectors.registry.log_source_for`` builds it for a URL with
``capture=trigger``, and for products whose only capture it is)."""

from __future__ import annotations

from connectors.model import LogSource
from connectors.trigger_capture.dialect import TriggerDialect
from connectors.trigger_capture.log_reader import TriggerLogReader, TriggerReaderConfig


def open_trigger_source(dialect: TriggerDialect) -> LogSource:
    """The ``LogSource`` of ``dialect``'s captured tables."""
    tables = dialect.tables
    reader = TriggerLogReader(dialect, TriggerReaderConfig(tables))
    return LogSource(reader, dialect.snapshots(tables), dialect.table_names, tables)
