"""The test encoder against an independent reader: every event ``binlog_encoder`` writes
parses in python-mysql-replication (with CRC32 checks on) to the values encoded.

This cross-check is what ties the encoder to something other than its author's reading
of MySQL's documentation; mysql-replication is tested against real MySQL servers upstream.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from tests.connectors.mysql.binlog_encoder import BinlogFile, Column, Table
from tests.connectors.mysql.typed_table import TYPED, TYPED_ROW

SID = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")
T = Table(
    108,
    "shop",
    "t",
    (
        Column("id", "int", nullable=False),
        Column("name", "varchar", max_length=400),
        Column("qty", "bigint", unsigned=True),
        Column("flag", "tinyint"),
        Column("price", "double"),
    ),
    ("id",),
)
ROW = {"id": -7, "name": "é" * 150, "qty": 2**64 - 1, "flag": -1, "price": 2.5}
NULLS = {"id": 8, "name": None, "qty": None, "flag": None, "price": None}


class _Control:
    """What mysql-replication asks of its control connection while parsing."""

    charset = "utf8mb4"

    def _get_dbms(self) -> str:
        return "mysql"


def _parse(binlog: BinlogFile) -> list[Any]:
    """Every event of ``binlog`` as mysql-replication reads it from a replication stream."""
    from pymysql.protocol import MysqlPacket
    from pymysqlreplication import event, row_event
    from pymysqlreplication.packet import BinLogPacketWrapper

    allowed = frozenset(
        {
            event.FormatDescriptionEvent,
            event.PreviousGtidsEvent,
            event.GtidEvent,
            event.QueryEvent,
            event.XidEvent,
            event.RotateEvent,
            event.NotImplementedEvent,
            row_event.TableMapEvent,
            row_event.WriteRowsEvent,
            row_event.UpdateRowsEvent,
            row_event.PartialUpdateRowsEvent,
            row_event.DeleteRowsEvent,
        }
    )
    table_map: dict[int, Any] = {}
    version: tuple[int, ...] = (0, 0, 0)
    post_header: Any = None
    parsed = []
    for _, raw in binlog.events:
        wrapper = BinLogPacketWrapper(
            MysqlPacket(b"\x00" + raw, "utf8"),
            table_map,
            _Control(),
            version,
            True,  # use_checksum
            allowed,
            None,
            None,
            None,
            None,
            False,
            False,
            True,  # verify_checksum
            True,  # optional_meta_data (binlog_row_metadata=FULL)
            False,
            False,
            post_header,
        )
        parsed_event = wrapper.event
        assert parsed_event._is_event_valid, f"bad CRC32 in {type(parsed_event).__name__}"
        if isinstance(parsed_event, event.FormatDescriptionEvent):
            version, post_header = parsed_event.mysql_version, parsed_event.post_header_len
        parsed.append(parsed_event)
    return parsed


def test_every_event_parses_to_the_values_encoded() -> None:
    binlog = BinlogFile("binlog.000001", server_id=3)
    binlog.format_description("8.0.36")
    binlog.previous_gtids({SID: [(1, 4), (6, 9)]})
    binlog.gtid(SID, 10, sequence_number=4)
    binlog.query("BEGIN", "shop")
    binlog.table_map(T)
    binlog.write_rows(T, [ROW, NULLS])
    binlog.update_rows(T, [(NULLS, ROW)])
    binlog.delete_rows(T, [ROW])
    binlog.xid(991)
    binlog.anonymous_gtid()
    binlog.query("ALTER TABLE t ADD COLUMN c INT", "shop")
    binlog.rotate("binlog.000002")
    (fde, previous, gtid, begin, table_map, write, update, delete, xid, anonymous, ddl, rotate) = (
        _parse(binlog)
    )
    assert (fde.mysql_version, fde.checksum_algorithm) == ((8, 0, 36), 1)
    assert len(fde.post_header_len) == 41
    assert previous._previous_gtids == f"{SID}-:['1-5', '6-10']"  # its own (odd) spelling
    assert (gtid.gtid, gtid.last_committed, gtid.sequence_number) == (f"{SID}:10", 3, 4)
    assert (begin.query, begin.schema) == ("BEGIN", b"shop")
    assert (ddl.query, ddl.schema) == ("ALTER TABLE t ADD COLUMN c INT", b"shop")
    assert (type(anonymous).__name__, anonymous.event_type) == ("NotImplementedEvent", 34)
    assert (table_map.schema, table_map.table, table_map.table_id) == ("shop", "t", 108)
    assert [c.name for c in table_map.columns] == ["id", "name", "qty", "flag", "price"]
    assert [c.type for c in table_map.columns] == [3, 15, 8, 1, 5]
    assert [c.unsigned for c in table_map.columns] == [False, False, True, False, False]
    assert table_map.columns[1].max_length == 400
    assert table_map.columns[1].collation_name == "utf8mb4_0900_ai_ci"
    assert table_map.optional_metadata.simple_primary_key_list == [0]
    assert [row["values"] for row in write.rows] == [ROW, NULLS]
    assert [(row["before_values"], row["after_values"]) for row in update.rows] == [(NULLS, ROW)]
    assert [row["values"] for row in delete.rows] == [ROW]
    assert xid.xid == 991
    assert (rotate.next_binlog, rotate.position) == ("binlog.000002", 4)
    assert {e.packet.server_id for e in (fde, gtid, xid)} == {3}
    assert [e.packet.log_pos for e in (fde, rotate)] == [binlog.events[1][0], binlog.position]


def test_a_payload_header_is_written_as_mysql_encodes_it() -> None:
    """``Transaction_payload::encode`` (MySQL 8.0, ``libbinlogevents/src/codecs/binary.cpp``):
    each field a packed type, the packed size of its packed value, the packed value --
    compression type, uncompressed size, payload size -- then the end mark. mysql-replication
    has no parser for this event, so the bytes are checked as the source writes them."""
    binlog = BinlogFile("binlog.000001")
    event = binlog.transaction_payload(b"abc", uncompressed_size=300)
    header = bytes([2, 1, 0]) + bytes([3, 3, 0xFC, 0x2C, 0x01]) + bytes([1, 1, 3]) + bytes([0])
    assert event[19:-4] == header + b"abc"


def test_a_partial_update_parses_to_its_images() -> None:
    binlog = BinlogFile("binlog.000001")
    binlog.format_description("8.0.36")
    binlog.table_map(T)
    binlog.partial_update_rows(T, [(NULLS, ROW)])
    _fde, _table_map, partial = _parse(binlog)
    assert type(partial).__name__ == "PartialUpdateRowsEvent"
    assert [(row["before_values"], row["after_values"]) for row in partial.rows] == [(NULLS, ROW)]


def test_every_column_type_parses_to_the_value_encoded() -> None:
    """DECIMAL, DATE, DATETIME, TIMESTAMP, JSON, ENUM, SET and BLOB, as mysql-replication's
    own decoders read them (with the table map's optional metadata for names, charsets and
    the ENUM/SET values)."""
    binlog = BinlogFile("binlog.000001")
    binlog.format_description("8.0.36")
    binlog.table_map(TYPED)
    binlog.write_rows(TYPED, [TYPED_ROW])
    _fde, table_map, write = _parse(binlog)
    assert [c.name for c in table_map.columns] == [c.name for c in TYPED.columns]
    assert table_map.columns[6].enum_values == ["", "s", "m", "l"]
    assert table_map.columns[7].set_values == ["a", "b", "c"]
    assert table_map.columns[8].character_set_name == "binary"
    (row,) = [r["values"] for r in write.rows]
    stamp = TYPED_ROW["stamp"]
    assert isinstance(stamp, dt.datetime)
    assert row == {
        **TYPED_ROW,
        "stamp": dt.datetime.fromtimestamp(stamp.timestamp()),  # its reading: local, naive
        "doc": {b"a": [1, True, None], b"name": "é".encode(), b"n": 70000},
        "tags": {"a", "c"},
    }
