"""A compressed transaction's events, parsed by mysql-replication as if the server had sent
them one by one (``payload`` takes them out of their TRANSACTION_PAYLOAD_EVENT).

mysql-replication 1.0 has no parser for the payload event; its own parser reads each inner
event with the stream's state (table maps, the control connection, the events asked for),
which ``BinLogStreamReader`` keeps in private attributes: ``_state`` names them, and a
version that renames one fails the MySQL stream tests (``tests/connectors/mysql``), not a
pipeline. Every inner event is placed at the payload event's position: the log has no
position inside a payload, and a transaction is resumed from its start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from connectors.mariadb.binlog.payload import UndecodablePayloadError, inner_events

TRANSACTION_PAYLOAD = 40  # TRANSACTION_PAYLOAD_EVENT
TABLE_MAP = 19
CHECKSUM_SIZE = 4  # CRC32 (binlog_checksum), after the payload event's body


def unpacked(reader: Any, event: Any) -> Iterator[Any]:
    """The parsed events inside ``event`` (a payload event mysql-replication did not parse),
    or ``event`` itself when its payload cannot be decoded: the log reader then refuses it
    at its position."""
    from pymysql.protocol import MysqlPacket
    from pymysqlreplication.packet import BinLogPacketWrapper

    outer = event.packet
    checksum = CHECKSUM_SIZE if _state(reader, "use_checksum") else 0
    data = outer.packet.get_all_data()  # the OK byte, the header, the body, the checksum
    try:
        raws = inner_events(data[20 : 1 + outer.event_size - checksum])
    except UndecodablePayloadError:
        yield event
        return
    for raw in raws:
        wrapper = BinLogPacketWrapper(
            MysqlPacket(b"\x00" + raw, "utf8"),
            reader.table_map,
            reader._ctl_connection,
            reader.mysql_version,
            False,  # no checksum inside a payload
            _state(reader, "allowed_events_in_packet"),
            _state(reader, "only_tables"),
            _state(reader, "ignored_tables"),
            _state(reader, "only_schemas"),
            _state(reader, "ignored_schemas"),
            _state(reader, "freeze_schema"),
            _state(reader, "ignore_decode_errors"),
            False,
            _state(reader, "optional_meta_data"),
            _state(reader, "enable_logging"),
            _state(reader, "use_column_name_cache"),
            _state(reader, "post_header_lengths"),
        )
        if wrapper.event is None:
            continue  # an event the stream does not ask for
        if wrapper.event_type == TABLE_MAP:  # as BinLogStreamReader.fetchone keeps them
            reader.table_map[wrapper.event.table_id] = wrapper.event.get_table()
        wrapper.log_pos, wrapper.event_size = outer.log_pos, outer.event_size
        yield wrapper.event


def _state(reader: Any, name: str) -> Any:
    """A private attribute of mysql-replication's ``BinLogStreamReader``."""
    return getattr(reader, f"_BinLogStreamReader__{name}")
