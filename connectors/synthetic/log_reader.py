"""The synthetic source as a connector: ``synthetic:///?seed=7&transactions=1000&...``.

The URL's query sets ``WorkloadSpec`` fields (see ``connectors.synthetic.workload``). The
log is finite: once read to its end the reader yields ``Idle`` markers, as a quiet database
would, so ``run_until_caught_up`` and ``replcheck cdc run --until-caught-up`` finish.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import fields
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from cdc_core.capture.events import RawChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableDescription, TableSnapshot
from cdc_core.errors import ConfigError, TerminalError
from connectors.synthetic.workload import KEY, Workload, WorkloadSpec

if TYPE_CHECKING:
    import pyarrow as pa

IDLE_PAUSE_S = 0.05  # how long a reader at the end of the log waits between Idle markers


def spec_of_url(url: str) -> WorkloadSpec:
    """The workload a ``synthetic:`` URL describes.

    Raises:
        ConfigError: An unknown parameter or a value of the wrong kind.
    """
    known = {f.name: f.type for f in fields(WorkloadSpec)}
    values: dict[str, object] = {}
    for name, text in parse_qsl(urlsplit(url).query, strict_parsing=False):
        if name == "pace":
            continue  # the reader's, see pace_of_url
        if name not in known:
            raise ConfigError(f"synthetic URL parameter {name!r} unknown; known: {sorted(known)}")
        values[name] = _parse(name, text, str(known[name]))
    return WorkloadSpec(**values)  # type: ignore[arg-type]


def pace_of_url(url: str) -> float | None:
    """The ``pace`` parameter: at most this many changes per second (None: no limit)."""
    for name, text in parse_qsl(urlsplit(url).query):
        if name == "pace":
            pace = _parse(name, text, "float")
            assert isinstance(pace, float)
            if pace <= 0:
                raise ConfigError("synthetic URL parameter pace must be positive")
            return pace
    return None


def _parse(name: str, text: str, kind: str) -> object:
    try:
        if kind == "bool":
            return text.lower() in ("1", "true", "yes")
        return float(text) if kind == "float" else int(text)
    except ValueError as exc:
        raise ConfigError(f"synthetic URL parameter {name}={text!r} is not a {kind}") from exc


def table_schema() -> pa.Schema:
    """The columns every synthetic table has."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("v", pa.int64()),
            pa.field("s", pa.string()),
            pa.field("note", pa.string()),
        ]
    )


class SyntheticSource:
    """Log reader and snapshot reader over a generated ``Workload``.

    Args:
        workload: The generated log.
        pace: Yield at most this many changes per second, like a source written to at that
            rate (None: as fast as the pipeline reads).
    """

    def __init__(self, workload: Workload, pace: float | None = None) -> None:
        self.workload = workload
        self.pace = pace

    def describe(self, table: str) -> TableDescription:
        """Every synthetic table has the same columns, keyed by ``id``."""
        if table not in self.workload.spec.table_names:
            raise TerminalError(
                f"table {table!r} not found in the synthetic source; it has"
                f" {self.workload.spec.table_names}"
            )
        return TableDescription(table, table_schema(), KEY)

    def end_position(self) -> Position:
        """The position of the generated log's last change."""
        return self.workload.end_position()

    def iter_changes(self, start: Position | None) -> Iterator[RawChange | Idle]:
        """The log from ``start`` (inclusive) on, then ``Idle`` markers forever."""
        end = self.workload.snapshot_position()
        began, sent = time.monotonic(), 0
        for change, _ in self.workload.iter_log():
            end = change.position
            if start is not None and change.position >= start:
                yield change
                sent += 1
                if self.pace is not None and sent % 100 == 0:
                    time.sleep(max(0.0, began + sent / self.pace - time.monotonic()))
        while True:
            yield Idle(end)
            time.sleep(IDLE_PAUSE_S)

    @contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """The tables' initial rows, at the position before the log's first change."""
        yield self.workload.snapshot_position(), self._iter_tables(tables, keys or {})

    def _iter_tables(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]]
    ) -> Iterator[TableSnapshot]:
        import pyarrow as pa

        for table in tables:
            rows = self.workload.initial_rows(table)
            if table in keys:
                wanted = set(keys[table])
                rows = [row for row in rows if (row["id"],) in wanted]
            batch = pa.RecordBatch.from_pylist(rows, table_schema())
            yield TableSnapshot(self.describe(table), iter([batch]))

    def close(self) -> None:
        """Nothing to release."""
