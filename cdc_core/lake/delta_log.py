"""A Delta table's commits as its log holds them, each under its own version.

deltalake's ``DeltaTable.history()`` numbers the commits it returns by counting down from
the version the table was loaded at, but lists the log again to find them: a commit that
lands between the two shifts every number by one. A validation then took a mirror version
with the next version's mark and lost that batch's rows ("missing in target" while the
pipeline wrote: ``tests/cdc_core/lake/test_mirror_state.py``, "a batch landing while the
mirror is read"). Reading each commit file by its name
(``_delta_log/<version>.json``, Delta protocol "Delta Log Entries") gives each commit its
version.
"""

from __future__ import annotations

import json
from typing import Any

from cdc_core.lake_location import LakeLocation


def read_commits(path: LakeLocation, newest: int, since: int = -1) -> list[dict[str, Any]]:
    """The commit information of versions ``since + 1`` to ``newest`` of the Delta table at
    ``path``, oldest first, each with its ``version``, as ``history()`` gives it; versions
    the log no longer holds (cleaned up by log retention) are left out."""
    found: list[dict[str, Any]] = []
    for version in range(newest, since, -1):
        data = path.join("_delta_log", f"{version:020d}.json").read_bytes(written_once=True)
        if data is None:
            break  # cleaned up: every older commit file is gone too
        found.append({**_commit_info(data), "version": version})
    found.reverse()
    return found


def _commit_info(data: bytes) -> dict[str, Any]:
    """The ``commitInfo`` action of a commit file (empty: a writer that wrote none)."""
    for line in data.decode("utf-8").splitlines():
        if '"commitInfo"' in line:
            action = json.loads(line)
            if "commitInfo" in action:
                return dict(action["commitInfo"])
    return {}


def first_table_id(path: LakeLocation) -> str | None:
    """The table id the first commit of the Delta table at ``path`` gives it (None: that
    commit is cleaned up, or holds no ``metaData``). A table created again gets another."""
    data = path.join("_delta_log", f"{0:020d}.json").read_bytes(written_once=True)
    for line in (data or b"").decode("utf-8").splitlines():
        if '"metaData"' in line:
            action = json.loads(line)
            if "metaData" in action:
                return str(action["metaData"].get("id"))
    return None
