"""A small lake the sink writes, for the lake readers' tests: batches at positions 5, 7 (a
truncate) and 8, a column ``w`` added, then a batch labelled 12 holding events at 11 and
12, so every kind of mirror read (a version alone, a version with later events, no version
yet) has a position that needs it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableDescription
from cdc_core.lake.layout import LakeTable
from cdc_core.lake.sink import LakeSink
from cdc_core.lake.target import LakeEvent, TableBatch

TABLE = TableDescription("s.t", pa.schema([("id", pa.int64()), ("v", pa.string())]), ("id",))
WIDER = TableDescription("s.t", TABLE.schema.append(pa.field("w", pa.int64())), ("id",))
AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
# The state at 12 (and after).
AT_12 = {(0, "again0", None), (1, "u1", 7), (3, "again3", None), (9, None, 9)}


def _event(op: str, row: dict[str, Any], position: int, seq: int) -> LakeEvent:
    return LakeEvent(op, row, position, seq, "x", AT)


def write_sample_lake(lake: Path) -> LakeTable:
    """Write the sample table ``s.t`` into ``lake``."""
    sink = LakeSink(lake, "p")
    first = [_event("c", {"id": k, "v": f"v{k}"}, 5, k) for k in range(6)]
    sink.write([TableBatch(TABLE, first)], Position.of(5), ["s.t"])
    sink.write([TableBatch(TABLE, [_event("t", {}, 7, 0)])], Position.of(7), ["s.t"])
    again = [_event("c", {"id": k, "v": f"again{k}"}, 8, k) for k in range(4)]
    sink.write([TableBatch(TABLE, again)], Position.of(8), ["s.t"])
    sink.follow_schema(WIDER, Position.of(9))
    later = [
        _event("u", {"id": 1, "v": "u1", "w": 7}, 11, 0),
        _event("d", {"id": 2, "v": "again2", "w": None}, 11, 1),
        _event("c", {"id": 9, "v": None, "w": 9}, 12, 0),
    ]
    sink.write([TableBatch(WIDER, later)], Position.of(12), ["s.t"])
    return LakeTable(lake, "s.t")
