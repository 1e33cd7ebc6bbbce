"""Delta tables opened for reading, once per version: an object store answers each open with
a read of every commit file since the last checkpoint, and one validation opens the
changelog and the mirror about a dozen times (the high-water mark, the schema, the state at
the position, the audit, the incremental checks).

``read_delta`` lists ``_delta_log/`` and reads its first commit (two or three requests), and
hands every reader of a version the table opened for it, so a validation reads each commit
file about once (``bench/bench_object_store.py`` counts the GETs). A version of a Delta
table never changes, so the shared table holds for every reader; readers never write
through it (writers call ``LakeLocation.open_delta``). A version is known by the table's id
as well as its number: a table created again at the same place (a reload) numbers its
versions from 0 again, under a new id. A local lake is opened afresh each time: its opens
read local files.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from cdc_core.errors import TerminalError
from cdc_core.lake.delta_log import first_table_id
from cdc_core.lake_location import LakeLocation

if TYPE_CHECKING:
    from deltalake import DeltaTable

KEPT = 16  # opened versions kept, newest used first (a table's snapshot each)
_COMMIT = re.compile(r"^(\d{20})\.json$")
# A version of one table: its URL, the id its first commit gives it, its number, the options.
Key = tuple[str, str, int, tuple[tuple[str, str], ...]]
_OPENED: OrderedDict[Key, DeltaTable] = OrderedDict()
_LOCK = threading.Lock()


def read_delta(location: LakeLocation, version: int | None = None) -> DeltaTable:
    """The Delta table at ``location`` at ``version`` (None: its newest), for reading only."""
    if location.is_local:
        return location.open_delta(version)
    versions = listed_versions(location)
    wanted = max(versions, default=None) if version is None else version
    table_id = _table_id(location) if wanted in versions else None
    if wanted is None or table_id is None:  # deltalake says what is wrong, or reads it all
        return location.open_delta(version)
    key = (location.url, table_id, wanted, tuple(sorted(location.delta_options().items())))
    with _LOCK:
        table = _OPENED.get(key)
        if table is not None:
            _OPENED.move_to_end(key)
            return table
    table = location.open_delta(wanted)
    if str(table.metadata().id) == table_id:  # not created again while it was opened
        with _LOCK:
            _OPENED[key] = table
            while len(_OPENED) > KEPT:
                _OPENED.popitem(last=False)
    return table


def listed_versions(location: LakeLocation) -> set[int]:
    """The versions whose commit files the Delta log at ``location`` lists (none when the
    store cannot list it: the open that follows names the problem)."""
    import pyarrow.fs as pafs

    filesystem, path = location.join("_delta_log").filesystem()
    try:
        listed = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except OSError:
        return set()
    return {int(m.group(1)) for info in listed if (m := _COMMIT.match(info.base_name))}


def _table_id(location: LakeLocation) -> str | None:
    """``first_table_id``, None when the store fails it (the open that follows says why)."""
    try:
        return first_table_id(location)
    except (OSError, TerminalError):
        return None
