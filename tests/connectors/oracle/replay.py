"""Replay recorded V$LOGMNR_CONTENTS rows as a ``LogReader``.

The replay runs recorded rows through ``contents.ChangeAssembler``, the code the live
``OracleLogReader`` runs on the rows its query returns, so a recording tests the real
thing without an Oracle server.

File formats (UTF-8):

- **Contents** (JSON lines): one JSON object per V$LOGMNR_CONTENTS row, in the order the view
  returned them, keyed by the view's column names (``contents.CONTENTS_COLUMNS``): ``SCN``
  (integer), ``TIMESTAMP`` (``"YYYY-MM-DD HH24:MI:SS"``, the server's wall clock), ``XID``
  (hex of the RAW(8)), ``OPERATION_CODE``, ``OPERATION``, ``SEG_OWNER``, ``TABLE_NAME``,
  ``ROW_ID``, ``CSF``, ``ROLLBACK``, ``RS_ID``, ``SSN``, ``STATUS``, ``INFO``, ``SQL_REDO``,
  ``SQL_UNDO``. Missing keys are NULL; ``COMMIT_SCN`` and ``THREAD#`` may be present and
  are ignored. Blank lines are skipped. ``ContentsRow.to_record`` writes this shape, so
  rows fetched from a live session can be recorded with ``json.dumps(row.to_record())``.
- **Tables** (one JSON object): ``{"OWNER.TABLE": {"key": [primary key columns],
  "columns": [[COLUMN_NAME, DATA_TYPE, DATA_PRECISION, DATA_SCALE, NULLABLE], ...]}}`` --
  the ALL_TAB_COLUMNS rows ``sql.COLUMNS`` selects, in column order.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from cdc_core.capture.events import RawChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged, TableDescription, TableSnapshot
from cdc_core.errors import ConfigError
from connectors.model import TableSchema
from connectors.oracle.errors import RedoParseError
from connectors.oracle.logminer.contents import (
    DDL,
    ChangeAssembler,
    ContentsRow,
    description_of,
    schema_from_dictionary,
)
from connectors.oracle.position import position_of


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """Where a recording is and how to read it.

    Args:
        contents: The JSON-lines file of V$LOGMNR_CONTENTS rows.
        tables: The JSON file describing the captured tables.
        server_time_zone: The IANA zone the recorded ``TIMESTAMP`` values are in.
    """

    contents: Path
    tables: Path
    server_time_zone: str = "UTC"


def load_tables(path: Path) -> dict[str, TableSchema]:
    """The captured tables of a tables file (see the module docstring).

    Raises:
        ConfigError: The file is missing or not of that shape.
    """
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return {
            table: schema_from_dictionary(
                table, [tuple(row) for row in entry["columns"]], tuple(entry["key"])
            )
            for table, entry in document.items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(
            f"cannot read the replay tables file {path}: {exc}; it maps OWNER.TABLE to"
            ' {"key": [...], "columns": [[name, data_type, precision, scale, nullable], ...]}'
        ) from exc


def iter_contents(path: Path) -> Iterator[ContentsRow]:
    """The rows of a contents file, checking that SCNs never decrease.

    Raises:
        RedoParseError: A line is not a contents row, or SCNs go backwards (names the line).
    """
    previous = -1
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = ContentsRow.from_record(json.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise RedoParseError(
                    f"{path}:{number}: not a V$LOGMNR_CONTENTS row ({exc})"
                ) from exc
            if row.scn < previous:
                raise RedoParseError(f"{path}:{number}: SCN {row.scn} comes after SCN {previous}")
            previous = row.scn
            yield row


class ReplayLogReader:
    """A ``LogReader`` over a recording (see the module docstring).

    ``iter_changes`` yields the recording's changes from ``start`` on, then ``Idle`` at the
    last SCN forever, as a live reader does once it has caught up. The tables file describes
    the tables as of the recording's first row; ``tables`` (and ``describe``) follow the DDL
    read since, including the DDL before ``start``.
    """

    def __init__(self, config: ReplayConfig) -> None:
        self.config = config
        self.tables: dict[str, TableSchema] = load_tables(config.tables)
        self._zone: dt.tzinfo = (
            dt.UTC if config.server_time_zone == "UTC" else ZoneInfo(config.server_time_zone)
        )

    def describe(self, table: str) -> TableDescription:
        """The recorded table's columns and key."""
        if table not in self.tables:
            raise ConfigError(f"table {table} is not in {self.config.tables}")
        return description_of(self.tables[table])

    def end_position(self) -> Position:
        """The last SCN of the recording."""
        last = 0
        for row in iter_contents(self.config.contents):
            last = row.scn
        return position_of(last)

    def iter_changes(self, start: Position | None) -> Iterator[RawChange | TableChanged | Idle]:
        """The recorded changes and classified DDL at or after ``start``, then ``Idle``
        forever.

        ``None`` replays from the recording's first row: a recording stands for a log
        being written while the reader follows it, so its "current end" is its start.
        """
        self.tables.clear()  # in place: whoever holds the dictionary sees it follow the DDL
        self.tables.update(load_tables(self.config.tables))
        assembler = ChangeAssembler(self.tables, self._zone)
        low = 0 if start is None else start.value
        last = low
        for row in iter_contents(self.config.contents):
            if row.scn >= low:
                last = row.scn
                yield from assembler.feed(row)
            elif row.operation_code == DDL:
                assembler.feed(row)  # only for the dictionary: the DDL precedes the start
        yield from assembler.flush()
        while True:
            yield Idle(position_of(last))

    def close(self) -> None:
        """Nothing to release: the file is opened per ``iter_changes``."""


class ReplaySnapshotReader:
    """A ``SnapshotReader`` for a recording that starts from empty tables: every table is
    empty at the SCN just before the recording's first row (what a pipeline loads before
    it replays the recording)."""

    def __init__(self, reader: ReplayLogReader) -> None:
        self.reader = reader

    @contextlib.contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """Empty tables at the SCN before the recording's first row."""
        first = next(iter_contents(self.reader.config.contents), None)
        position = position_of(max(first.scn - 1, 0) if first else 0)
        yield position, iter([TableSnapshot(self.reader.describe(t), iter(())) for t in tables])
