"""One binlog rows event as ``RowChange`` values.

Insert events carry an after-image, delete events a before-image, update events both; with
``binlog_row_image=MINIMAL`` a before-image holds only the primary key and an after-image
only the columns the statement set, and with ``NOBLOB`` unchanged BLOB/TEXT columns are
left out (https://mariadb.com/kb/en/replication-and-binary-log-system-variables/#binlog_row_image).
Left-out columns are ``ABSENT``; ``cdc_core.rebuild.full_width`` completes them. A date that is
neither zero nor a calendar date stops the reader (``zero_dates``). The rows of a
system-versioned table become changes of its current rows (``system_versioning``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

from cdc_core.capture.events import ABSENT, RowChange, key_values, lacks_absent
from cdc_core.capture.position import Position
from cdc_core.errors import TerminalError
from connectors.base import key_text
from connectors.mariadb.binlog.schema_tracker import TableLayout
from connectors.mariadb.binlog.values import iter_images
from connectors.mariadb.generated import MissingVirtualValueError
from connectors.mariadb.system_versioning import current_change
from connectors.mariadb.zero_dates import NOT_A_DATE, UnrepresentableDateError


def row_changes(
    event: Any, layout: TableLayout, txid: str, position: Position
) -> Iterator[RowChange]:
    """The changes of a mysql-replication rows event whose header has been read.

    The rows are decoded here from the event's remaining bytes (``binlog_values``), never
    by mysql-replication.
    """
    kind = type(event).__name__
    data = event.packet.read(event.event_size - event.packet.read_bytes)
    bitmaps = [event.columns_present_bitmap]
    if kind == "UpdateRowsEvent":
        bitmaps.append(event.columns_present_bitmap2)
    if layout.period is not None:
        yield from _current_row_changes(kind, layout, txid, position, data, bitmaps)
        return
    for images in iter_images(layout.codecs, bitmaps, data):
        # The first image locates the row: an insert's after-image, else the before-image.
        locator = _locator(layout, images[0], position)
        if layout.virtual and kind != "DeleteRowsEvent":
            _check_virtual(layout, images[-1], position)
        if layout.dated:
            for image in images:
                if NOT_A_DATE in map(image.get, layout.dated):  # in C: this runs per row
                    _refuse_date(layout, image, locator, position)
        if kind == "WriteRowsEvent":
            yield RowChange(txid, position, "c", layout.table, locator, images[0])
        elif kind == "UpdateRowsEvent":
            before, after = images
            yield RowChange(txid, position, "u", layout.table, locator, after, before)
        else:
            yield RowChange(txid, position, "d", layout.table, locator, None, images[0])


def _current_row_changes(
    kind: str,
    layout: TableLayout,
    txid: str,
    position: Position,
    data: bytes,
    bitmaps: Sequence[bytes],
) -> Iterator[RowChange]:
    """The changes a rows event of a system-versioned table makes to its current rows."""
    assert layout.period is not None
    for images in iter_images(layout.codecs, bitmaps, data):
        found = current_change(kind, images, layout.period)
        if found is None:
            continue  # a history row: written, ended or purged
        op, shown = found
        locator = _locator(layout, shown[0], position)
        if layout.dated:
            for image in shown:
                if NOT_A_DATE in map(image.get, layout.dated):
                    _refuse_date(layout, image, locator, position)
        if op == "c":
            yield RowChange(txid, position, "c", layout.table, locator, shown[0])
        elif op == "u":
            yield RowChange(txid, position, "u", layout.table, locator, shown[1], shown[0])
        else:
            yield RowChange(txid, position, "d", layout.table, locator, None, shown[0])


def _refuse_date(
    layout: TableLayout,
    image: Mapping[str, object],
    locator: tuple[object, ...],
    position: Position,
) -> NoReturn:
    """Refuse the image's date that is neither zero nor a calendar date (``zero_dates``),
    naming the row by its key."""
    column = next(c for c in layout.dated if image.get(c) is NOT_A_DATE)
    shown = key_text(layout.key, locator)
    raise UnrepresentableDateError.of(layout.table, column, shown, position.text)


def _check_virtual(layout: TableLayout, after: Mapping[str, object], position: Position) -> None:
    """Stop on an after-image without a virtual column's value (``generated``)."""
    for column in layout.virtual:
        if after.get(column, ABSENT) is ABSENT:
            raise MissingVirtualValueError.of(layout.table, column, position.text)


def _locator(
    layout: TableLayout, image: Mapping[str, object], position: Position
) -> tuple[object, ...]:
    key = key_values(image, layout.key)
    if lacks_absent(key):  # every change: the error's work only when it is one
        return key
    missing = [c for c, v in zip(layout.key, key, strict=True) if v is ABSENT]
    raise TerminalError(
        f"a row of table {layout.table} at {position} does not carry its key columns"
        f" {missing} ({layout.key_source}); give the table a primary key or configure a key"
        " the binlog's row images carry",
        {"table": layout.table, "position": position.text},
    )
