"""What Delta's own log says about a lake table since a stored state: was every commit the
pipeline's, and which data files are new.

Every commit the pipeline makes carries its ``replcheck.*`` commit metadata
(``cdc_core.lake.layout``, ``cdc_core.lake.sink``, ``cdc_core.resync.rows``). A commit without
it that writes rows (a DELETE, an UPDATE, an OPTIMIZE, a RESTORE, another writer's append)
changed the lake behind the pipeline's back: the changelog may not show what changed, so
stored digests cannot be reused. A data file rewritten in place without a Delta commit is not
in the log; only a sweep of its leaves (or a full run) sees it.
"""

from __future__ import annotations

from cdc_core.lake.delta_log import read_commits
from cdc_core.lake.delta_reads import read_delta
from cdc_core.lake_location import LakeLocation
from validator.incremental.state import LogMark

# Commits that change no row (table features, properties, vacuum's bookkeeping).
_ROWLESS_OPERATIONS = frozenset(
    {"ADD FEATURE", "SET TBLPROPERTIES", "VACUUM START", "VACUUM END", "UPGRADE PROTOCOL"}
)
_PIPELINE_PREFIX = "replcheck."


def log_mark(path: LakeLocation) -> LogMark | None:
    """The Delta table's identity and newest version (None: no table there)."""
    if not path.join("_delta_log").is_dir():
        return None
    delta = read_delta(path)
    return LogMark(str(delta.metadata().id), delta.version())


def why_not_carried(path: LakeLocation, stored: LogMark | None, now: LogMark | None) -> str | None:
    """Why digests stored at ``stored`` cannot be carried to ``now`` for the Delta table at
    ``path`` (None: every commit since is the pipeline's)."""
    if now is None:
        return None if stored is None else f"{path} is gone since the stored state"
    if stored is not None and stored.table_id != now.table_id:
        return f"{path} was created again since the stored state (another Delta table id)"
    since = -1 if stored is None else stored.version
    if now.version < since:
        return f"{path} is at version {now.version}, before the stored version {since}"
    return _foreign_commit(path, since, now.version)


def _foreign_commit(path: LakeLocation, since: int, newest: int) -> str | None:
    if newest == since:
        return None
    commits = read_commits(path, newest, since)
    versions = {int(c["version"]) for c in commits}
    if not set(range(since + 1, newest + 1)) <= versions:
        return f"the Delta log of {path} no longer holds every version since {since}"
    for commit in sorted(commits, key=lambda c: int(c.get("version", -1))):
        if any(str(name).startswith(_PIPELINE_PREFIX) for name in commit):
            continue
        operation = str(commit.get("operation", "unknown"))
        if operation not in _ROWLESS_OPERATIONS:
            return (
                f"version {commit['version']} of {path} ({operation}) was not written by the"
                " pipeline: the lake was altered behind its back"
            )
    return None


def files_added_since(path: LakeLocation, stored: LogMark) -> list[str]:
    """Data files of the newest version that the stored version did not have."""
    before = set(read_delta(path, stored.version).file_uris())
    return [uri for uri in read_delta(path).file_uris() if uri not in before]
