"""Following a MySQL source to another server (a failover to a replica) by GTID set.

A pipeline's positions are one server's binlog files and offsets, meaningless on another.
What carries over is the set of transactions the lake holds: the GTID set executed at the
position the pipeline resumes from (its checkpoint's token, ``gtid.ExecutedGtids``). The
new server must have executed all of them and must still have in its binlog every
transaction it has executed beyond them; it then sends exactly those
(``COM_BINLOG_DUMP_GTID``, as a replica with ``SOURCE_AUTO_POSITION=1`` asks), and their
positions start a new epoch (``position.py``), ordered after every earlier one.

MariaDB's GTIDs (domain-server-sequence) are not followed: a pipeline on MariaDB refuses
to resume on another server (``SourceChangedError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cdc_core.errors import TerminalError
from connectors.mariadb.flavour import ServerFlavour

_NEW_SNAPSHOT = (
    "replicate from a new snapshot (a new pipeline name, or an empty state_dir and lake)"
)


class FailoverError(TerminalError):
    """The source URL reaches another server than the one whose log a pipeline (or the
    lake it writes) holds positions of, and cannot go on there."""

    @classmethod
    def refused(cls, source: str, found: str, why: str) -> FailoverError:
        return cls(
            f"the source {source} is now {found}, another server than the pipeline read"
            f" (a failover); it cannot go on there: {why}",
            {"source": source, "found": found},
        )

    @classmethod
    def lake_of_another(cls, source: str, found: str, recorded: Sequence[str]) -> FailoverError:
        """The validator reads a server other than the one the lake's pipeline reads."""
        return cls(
            f"the source {source} is {found}, but the lake table is written from the log of"
            f" {', '.join(recorded)}: positions of one server's log mean nothing on"
            " another's; run `replcheck cdc run` first (after a failover, it follows the"
            " source there), or point the source at the server the pipeline reads",
            {"source": source, "found": found},
        )


def check_failover(
    cursor: Any, flavour: ServerFlavour, source: str, found: str, executed: str
) -> None:
    """Refuse a new server that cannot send the log after the GTID set ``executed``.

    Raises:
        FailoverError: Not MySQL with ``gtid_mode=ON``; the server lacks transactions the
            lake holds; or it purged transactions the pipeline has not read.
    """
    if not flavour.is_mysql:
        why = f"following a failover is built for MySQL's GTIDs only; {_NEW_SNAPSHOT}"
        raise FailoverError.refused(source, found, why)
    cursor.execute("SELECT @@GLOBAL.gtid_mode")
    (mode,) = cursor.fetchone()
    if str(mode).upper() != "ON":
        why = f"it runs with gtid_mode={mode}; run it with gtid_mode=ON, or {_NEW_SNAPSHOT}"
        raise FailoverError.refused(source, found, why)
    cursor.execute(
        "SELECT GTID_SUBTRACT(%s, @@GLOBAL.gtid_executed), GTID_SUBTRACT(@@GLOBAL.gtid_purged, %s)",
        (executed, executed),
    )
    missing, purged = (str(value or "").replace("\n", "") for value in cursor.fetchone())
    if missing:
        why = (
            f"it lacks transactions the lake already holds ({missing}): it is behind the"
            " server the pipeline read, or not its replica; point the URL at a server that"
            f" has executed them, or {_NEW_SNAPSHOT}"
        )
        raise FailoverError.refused(source, found, why)
    if purged:
        why = (
            f"it has purged from its binary log transactions the pipeline has not read"
            f" ({purged}); {_NEW_SNAPSHOT}"
        )
        raise FailoverError.refused(source, found, why)


def refuse_unfollowed(
    source: str, found: str, held: Sequence[str], followed: Sequence[str]
) -> None:
    """An XA transaction the pipeline's buffer holds open whose prepare the token does not
    name would not be sent again (its GTID counts as executed): its changes would be lost.

    Raises:
        FailoverError: Such a transaction is held.
    """
    lost = [txid for txid in held if txid.startswith("xa-") and txid not in followed]
    if lost:
        why = (
            f"the pipeline holds the prepared XA transactions {lost}, whose changes the"
            f" new server would not send again; run the pipeline against the old server"
            f" until their XA COMMIT is read, or {_NEW_SNAPSHOT}"
        )
        raise FailoverError.refused(source, found, why)
