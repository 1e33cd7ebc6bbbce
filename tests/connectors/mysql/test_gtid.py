"""MySQL GTID sets and the set a reader has executed at each position (``gtid.py``)."""

from __future__ import annotations

import json
import uuid

import pytest

from connectors.mariadb.gtid import ExecutedGtids, GtidSet, executed_of, parse_gtid
from connectors.mariadb.position import describe_position, epoch_of, position_of, to_position
from tests.connectors.mysql.binlog_encoder import BinlogFile

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "4f22ab58-71ca-11e1-9e33-c80aa9429562"


@pytest.mark.parametrize(
    ("text", "spelled"),
    [
        ("", ""),
        (f"{A}:1-5", f"{A}:1-5"),
        (f"{B}:3,\n{A}:1-3:5:4", f"{A}:1-5,{B}:3"),  # MySQL's newlines; intervals merged
        (f"{A.upper()}:7:1-2", f"{A}:1-2:7"),
        (f"{A}:1-2:mytag:5-6", f"{A}:1-2:mytag:5-6"),  # MySQL 8.4's tagged GTIDs
    ],
)
def test_a_set_reads_and_spells_as_mysql_does(text: str, spelled: str) -> None:
    assert str(GtidSet.parse(text)) == spelled


def test_adding_transactions_joins_intervals() -> None:
    found = GtidSet.parse(f"{A}:1-3:7-9")
    for number in (5, 4, 6, 11):
        found.add((A, number))
    assert str(found) == f"{A}:1-9:11"
    assert (A, 10) not in found and (A, 11) in found and (B, 1) not in found
    assert GtidSet.parse(f"{A}:2-9").issubset(found)
    assert not GtidSet.parse(f"{A}:2-10").issubset(found)
    assert not GtidSet.parse(f"{B}:1").issubset(found)


def test_a_previous_gtids_body_decodes_to_its_set() -> None:
    binlog = BinlogFile("binlog.000001")
    event = binlog.previous_gtids({uuid.UUID(A): [(1, 4), (6, 6)], uuid.UUID(B): [(2, 3)]})
    assert str(GtidSet.decode(event[19:])) == f"{A}:1-4:6,{B}:2-3"


def test_a_token_holds_the_groups_ended_at_its_position_and_open_xa_by_name() -> None:
    gtids = ExecutedGtids(GtidSet.parse(f"{A}:1-4"), 100)
    gtids.ended(90, (A, 99))  # before the base: already in it
    gtids.ended(150, (A, 5))
    gtids.prepare(200, "xa-1-61-62", (A, 6))
    gtids.ended(250, (A, 7))
    gtids.outcome(300, "xa-1-61-62")
    gtids.ended(300, (A, 8))

    def read(at: int) -> tuple[str, dict[str, str]]:
        token = gtids.token(at)
        assert token is not None
        data = json.loads(token)
        return data["executed"], data["prepared"]

    assert read(149) == (f"{A}:1-4", {})
    assert read(150) == (f"{A}:1-5", {})
    assert read(260) == (f"{A}:1-5:7", {"xa-1-61-62": f"{A}:6"})  # prepared, not executed
    assert gtids.token(120) is None  # before what it folded: not known any more
    assert read(300) == (f"{A}:1-8", {})
    # A token given back resumes with its open XA transactions.
    resumed = ExecutedGtids.from_token(json.dumps({"executed": f"{A}:1-5", "prepared": {
        "xa-1-61-62": f"{A}:6"}}), 260)  # fmt: skip
    resumed.outcome(300, "xa-1-61-62")
    assert executed_of(resumed.token(300) or "") == f"{A}:1-6"
    assert parse_gtid(f"{A}:tag:3") == (f"{A}:tag", 3)


def test_positions_after_a_failover_order_after_every_earlier_one() -> None:
    late = position_of("binlog.000900", 2**31)
    early_on_new = position_of("replica-bin.000001", 4, epoch=1)
    assert early_on_new > late and epoch_of(early_on_new.value) == 1
    assert early_on_new.text == "replica-bin.000001:4@1"
    assert describe_position(early_on_new.value, "replica-bin") == "replica-bin.000001:4@1"
    assert describe_position(late.value, "binlog") == "binlog.000900:2147483648"
    assert to_position("binlog.000002", 5) == 2 << 32 | 5  # epoch 0: as before
