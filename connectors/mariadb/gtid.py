"""MySQL GTID sets, and the set a binlog reader has executed at each position it reached.

A GTID names a transaction on every server it is replicated to: ``source_uuid:number``
(MySQL 8.4 adds tags, ``uuid:tag:number``). A set is spelled as MySQL spells
``gtid_executed``: ``uuid:1-5:7,uuid2:1-3``. Positions stay ``file:offset``, one server's;
resuming on another server (a failover to a replica) needs the set of transactions
executed before the resume position, which the reader keeps (``ExecutedGtids``) and the
pipeline's checkpoint holds as the position's token.
"""

from __future__ import annotations

import bisect
import json
import re
import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

Gtid = tuple[str, int]  # ("uuid" or "uuid:tag", transaction number)
_INTERVAL = re.compile(r"(\d+)(?:-(\d+))?")


class GtidSet:
    """A set of GTIDs: per source (``uuid`` or ``uuid:tag``), closed intervals of numbers."""

    def __init__(self) -> None:
        self._intervals: dict[str, list[list[int]]] = {}

    @classmethod
    def parse(cls, text: str) -> GtidSet:
        """A set in MySQL's spelling (whitespace and newlines between members allowed).

        Raises:
            ValueError: Not a GTID set.
        """
        found = cls()
        for member in filter(None, (m.strip() for m in text.split(","))):
            source, *rest = member.split(":")
            key = str(uuid.UUID(source))
            for part in rest:
                interval = _INTERVAL.fullmatch(part)
                if interval is None:  # a tag: the intervals after it are the tag's
                    key = f"{uuid.UUID(source)!s}:{part.lower()}"
                    continue
                first = int(interval[1])
                found._add_interval(key, first, int(interval[2] or first))
        return found

    @classmethod
    def decode(cls, body: bytes) -> GtidSet:
        """The set of a ``PREVIOUS_GTIDS_LOG_EVENT`` body: sids with half-open intervals."""
        found = cls()
        (count,), at = struct.unpack_from("<Q", body), 8
        for _ in range(count):
            key = str(uuid.UUID(bytes=body[at : at + 16]))
            (intervals,) = struct.unpack_from("<Q", body, at + 16)
            at += 24
            for _ in range(intervals):
                start, end = struct.unpack_from("<qq", body, at)
                found._add_interval(key, start, end - 1)
                at += 16
        return found

    def copy(self) -> GtidSet:
        copied = GtidSet()
        copied._intervals = {key: [list(i) for i in v] for key, v in self._intervals.items()}
        return copied

    def add(self, gtid: Gtid) -> None:
        """Add one transaction."""
        self._add_interval(gtid[0], gtid[1], gtid[1])

    def update(self, gtids: Iterable[Gtid]) -> None:
        for gtid in gtids:
            self.add(gtid)

    def __contains__(self, gtid: object) -> bool:
        if not isinstance(gtid, tuple):
            return False
        key, number = gtid
        intervals = self._intervals.get(key, [])
        at = bisect.bisect_right(intervals, [number, float("inf")]) - 1
        return at >= 0 and intervals[at][0] <= number <= intervals[at][1]

    def issubset(self, other: GtidSet) -> bool:
        """Whether every GTID of this set is in ``other``."""
        for key, intervals in self._intervals.items():
            theirs = other._intervals.get(key, [])
            for first, last in intervals:
                at = bisect.bisect_right(theirs, [first, float("inf")]) - 1
                if at < 0 or theirs[at][1] < last:
                    return False
        return True

    def __bool__(self) -> bool:
        return bool(self._intervals)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GtidSet) and self._intervals == other._intervals

    def __str__(self) -> str:
        members: dict[str, list[str]] = {}
        for key in sorted(self._intervals):
            source, _, tag = key.partition(":")
            parts = members.setdefault(source, [])
            if tag:
                parts.append(tag)
            parts += [f"{a}-{b}" if a != b else str(a) for a, b in self._intervals[key]]
        return ",".join(":".join((source, *parts)) for source, parts in members.items())

    def __repr__(self) -> str:
        return f"GtidSet({str(self)!r})"

    def _add_interval(self, key: str, first: int, last: int) -> None:
        intervals = self._intervals.setdefault(key, [])
        at = bisect.bisect_left(intervals, [first, first])
        if at > 0 and intervals[at - 1][1] >= first - 1:  # joins the interval before
            at -= 1
            first = intervals[at][0]
        end = at
        while end < len(intervals) and intervals[end][0] <= last + 1:
            last = max(last, intervals[end][1])
            end += 1
        intervals[at:end] = [[first, last]]


def parse_gtid(text: str) -> Gtid:
    """``uuid:number`` (or ``uuid:tag:number``) as a ``Gtid``."""
    source, _, number = text.rpartition(":")
    head, _, tag = source.partition(":")
    key = str(uuid.UUID(head)) + (f":{tag.lower()}" if tag else "")
    return key, int(number)


def gtid_text(gtid: Gtid) -> str:
    return f"{gtid[0]}:{gtid[1]}"


@dataclass
class ExecutedGtids:
    """The GTID set executed at each position a reader reached from ``base_at`` on.

    A transaction is executed at the end of its event group. MySQL's XA transaction is
    special: its changes are in the group its ``XA PREPARE`` ends (under one GTID), its
    outcome in a later group (under another). While its outcome is not read, a pipeline
    holds it open, so resuming elsewhere must read its prepare group again: its GTID stays
    out of the set and is kept by name (``prepared``) until its outcome.

    Args:
        base: The set executed at ``base_at``.
        base_at: The position (value) it is the set of.
        prepared: XA transactions prepared at ``base_at`` whose outcome was not read, by
            name (the reader's ``xa-...`` txid), with their prepare group's GTID.
    """

    base: GtidSet
    base_at: int
    prepared: dict[str, Gtid] = field(default_factory=dict)
    _ended: list[tuple[int, Gtid]] = field(default_factory=list)  # groups ended after base_at
    _prepares: list[tuple[int, str, Gtid]] = field(default_factory=list)
    _outcomes: list[tuple[int, str]] = field(default_factory=list)

    @classmethod
    def from_token(cls, token: str, at: int) -> ExecutedGtids:
        """The set a checkpoint's token (``token``) records at position ``at``.

        Raises:
            ValueError: Not a token of this reader's.
        """
        data = json.loads(token)
        prepared = {str(name): parse_gtid(gtid) for name, gtid in data["prepared"].items()}
        return cls(GtidSet.parse(data["executed"]), at, prepared)

    def ended(self, at: int, gtid: Gtid) -> None:
        """The group of ``gtid`` ended at ``at`` (an XA prepare: see ``prepare``)."""
        if at > self.base_at:
            self._ended.append((at, gtid))

    def prepare(self, at: int, name: str, gtid: Gtid) -> None:
        """XA transaction ``name`` was prepared by the group of ``gtid``, ending at ``at``."""
        if at > self.base_at:
            self._prepares.append((at, name, gtid))

    def outcome(self, at: int, name: str) -> None:
        """The outcome of XA transaction ``name`` was read; its group ended at ``at``."""
        if at > self.base_at:
            self._outcomes.append((at, name))

    def token(self, position: int) -> str | None:
        """The set executed at ``position`` (and the XA transactions open there), as the
        checkpoint keeps it; None before ``base_at`` (not known). A later call at the same
        or a later position is cheaper: what lies before ``position`` is folded in."""
        if position < self.base_at:
            return None
        executed, prepared = self._at(position)
        self.base, self.base_at, self.prepared = executed, position, prepared
        self._ended = [e for e in self._ended if e[0] > position]
        self._prepares = [p for p in self._prepares if p[0] > position]
        self._outcomes = [o for o in self._outcomes if o[0] > position]
        named = {name: gtid_text(gtid) for name, gtid in sorted(prepared.items())}
        return json.dumps({"executed": str(executed), "prepared": named})

    def _at(self, position: int) -> tuple[GtidSet, dict[str, Gtid]]:
        executed = self.base.copy()
        executed.update(gtid for at, gtid in self._ended if at <= position)
        prepared = dict(self.prepared)
        prepared.update((name, gtid) for at, name, gtid in self._prepares if at <= position)
        for at, name in self._outcomes:
            if at <= position and name in prepared:
                executed.add(prepared.pop(name))
        return executed, prepared


def executed_of(token: str) -> str:
    """The GTID set a token records, in MySQL's spelling (``GtidSet`` without its XA
    transactions still open: those the server must send again)."""
    return str(json.loads(token)["executed"])
