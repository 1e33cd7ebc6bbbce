"""pgoutput messages parsed from bytes, and the reader's position arithmetic (no server)."""

from __future__ import annotations

import struct

import pytest

from cdc_core.errors import TerminalError
from connectors.postgres.log_reader import _Positions, _precedes, position_of
from connectors.postgres.pgoutput import messages as pg
from connectors.postgres.pgoutput.feedback import status_update


def _string(text: str) -> bytes:
    return text.encode() + b"\x00"


def _tuple(*values: bytes | str | None) -> bytes:
    out = struct.pack(">h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value == "u":
            out += b"u"
        elif isinstance(value, str):
            out += b"t" + struct.pack(">i", len(value.encode())) + value.encode()
        else:
            out += b"b" + struct.pack(">i", len(value)) + value
    return out


def test_update_with_key_tuple_inside_a_stream() -> None:
    payload = (
        b"U"
        + struct.pack(">II", 901, 16385)
        + b"K"
        + _tuple(b"\x00\x00\x00\x07", None)
        + b"N"
        + _tuple(b"\x00\x00\x00\x08", "u")
    )
    message = pg.parse_message(payload, in_stream=True)
    assert message == pg.UpdateMessage(
        901, 16385, "K", (b"\x00\x00\x00\x07", None), (b"\x00\x00\x00\x08", pg.UNCHANGED_TOAST)
    )
    # Outside a stream block the same kind of message carries no xid.
    assert pg.parse_message(payload[:1] + payload[5:], in_stream=False) == pg.UpdateMessage(
        None, 16385, "K", (b"\x00\x00\x00\x07", None), (b"\x00\x00\x00\x08", pg.UNCHANGED_TOAST)
    )


def test_logical_decoding_messages_in_and_outside_a_stream() -> None:
    body = b"\x01" + struct.pack(">Q", 0x1_0000_0028) + _string("replcheck.rewrite")
    body += struct.pack(">i", 5) + b'{"a"}'
    assert pg.parse_message(b"M" + body, in_stream=False) == pg.LogicalMessage(
        None, True, 0x1_0000_0028, "replcheck.rewrite", b'{"a"}'
    )
    streamed = pg.parse_message(b"M" + struct.pack(">I", 77) + b"\x00" + body[1:], True)
    assert streamed == pg.LogicalMessage(77, False, 0x1_0000_0028, "replcheck.rewrite", b'{"a"}')
    with pytest.raises(TerminalError, match="truncated"):
        pg.parse_message(b"M" + body[:-1], in_stream=False)


def test_relation_truncate_and_stream_messages() -> None:
    relation = (
        b"R"
        + struct.pack(">I", 16385)
        + _string("public")
        + _string("t")
        + b"d"
        + struct.pack(">h", 2)
        + b"\x01"
        + _string("id")
        + struct.pack(">Ii", 23, -1)
        + b"\x00"
        + _string("v")
        + struct.pack(">Ii", 25, -1)
    )
    assert pg.parse_message(relation, in_stream=False) == pg.RelationMessage(
        None,
        16385,
        "public",
        "t",
        "d",
        (pg.RelationColumn("id", 23, -1, True), pg.RelationColumn("v", 25, -1, False)),
    )
    truncate = b"T" + struct.pack(">iBII", 2, 3, 16385, 16390)
    assert pg.parse_message(truncate, in_stream=False) == pg.TruncateMessage(
        None, (16385, 16390), cascade=True, restart_identity=True
    )
    assert pg.parse_message(b"A" + struct.pack(">II", 9, 11), False) == pg.StreamAbortMessage(9, 11)
    assert pg.parse_message(b"S" + struct.pack(">IB", 9, 1), False) == pg.StreamStartMessage(
        9, True
    )
    commit = b"c" + struct.pack(">IBQQq", 9, 0, 0x100, 0x128, 86_400_000_000)
    message = pg.parse_message(commit, False)
    assert isinstance(message, pg.StreamCommitMessage) and message.end_lsn == 0x128
    assert message.commit_ts.isoformat() == "2000-01-02T00:00:00+00:00"


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"", "empty"),
        (b"Z", "unknown pgoutput message type"),
        (
            b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">h", 1) + b"b\x00\x00\x00\x09ab",
            "truncated",
        ),
        (b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">h", 1) + b"x", "unknown tuple value"),
        (b"D" + struct.pack(">I", 1) + b"N", "expected an old tuple"),
    ],
)
def test_malformed_messages_are_protocol_errors(payload: bytes, problem: str) -> None:
    with pytest.raises(pg.ProtocolError, match=problem):
        pg.parse_message(payload, in_stream=False)


def test_positions_grow_between_boundaries_and_after_restarts() -> None:
    positions = _Positions(0x1000)
    assert positions.boundary == 0x1000 and positions.after_boundary() == position_of(0x1001)
    assert positions.at(0x1040).text == "0/1040"
    assert positions.after_boundary().text == "0/1040+1"
    with pytest.raises(TerminalError, match="does not follow"):
        positions.at(0x1040)  # a boundary never repeats
    resumed = _Positions(0x1041)  # restarted after a change at 0/1040+1
    assert resumed.boundary == 0x1040 and resumed.after_boundary().text == "0/1040+2"
    exhausted = _Positions(0x1047)
    with pytest.raises(TerminalError, match="restarted 7 times"):
        exhausted.after_boundary()


def test_idle_moves_the_boundary_to_the_wal_end() -> None:
    positions = _Positions(0x1000)
    positions.after_boundary()
    assert positions.idle(0x2003).text == "0/2000"  # aligned down: a record boundary
    assert positions.after_boundary().text == "0/2000+1"
    assert positions.idle(0x1500).text == "0/2000"  # never backwards


def test_xid_order_wraps_around() -> None:
    assert _precedes(5, 10) and not _precedes(10, 10) and not _precedes(11, 10)
    assert _precedes(2**32 - 3, 4)  # assigned just before the counter wrapped


def test_status_update_layout() -> None:
    message = status_update(0x16B3748, reply=True)
    kind, write, flush, apply, _, reply = struct.unpack(">cQQQqB", message)
    assert (kind, write, flush, apply, reply) == (b"r", 0x16B3748, 0x16B3748, 0x16B3748, 1)


def test_a_row_message_outside_any_transaction_stops_the_reader_at_its_position() -> None:
    """A change never vanishes without a trace (issue 40's rule for every reader): an insert
    with no Begin before it is an error naming its position, never a skip."""
    from types import SimpleNamespace

    import pyarrow as pa

    from cdc_core.capture.source import TableDescription
    from connectors.postgres.log_reader import _Session

    described = TableDescription("public.t", pa.schema([("id", pa.int32())]), ("id",))
    reader = SimpleNamespace(
        tables=frozenset({"public.t"}),
        describe=lambda table: described,
        lookup_type=lambda oid: None,
        generated_columns=lambda table: (),
        generated_names=lambda table: frozenset(),
        connector=SimpleNamespace(connect=None),
        _lost_connections=None,
    )
    session = _Session(reader, _Positions(0x1000), None)  # type: ignore[arg-type]
    relation = (
        b"R" + struct.pack(">I", 16385) + _string("public") + _string("t") + b"d"
        + struct.pack(">h", 1) + b"\x01" + _string("id") + struct.pack(">Ii", 23, -1)
    )  # fmt: skip
    assert list(session._message(relation, 0)) == []
    insert = b"I" + struct.pack(">I", 16385) + b"N" + _tuple(b"\x00\x00\x00\x07")
    with pytest.raises(TerminalError, match=r"a change outside a transaction at 0/1000\+1"):
        list(session._message(insert, 0))
