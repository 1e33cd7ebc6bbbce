"""A fake MySQL 8 server on loopback: enough of the client/server protocol for the log
reader, serving binlog files written by ``binlog_encoder``.

It speaks (https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_basics.html):

- the v10 handshake, ``mysql_native_password`` offered and any password accepted (no TLS),
  or, given ``auth`` (``fake_auth``), ``caching_sha2_password`` with its one password,
  over TLS when it has a TLS context;
- ``COM_QUERY`` answered from a list of recorded answers (a regular expression per
  statement, a result set or OK), or, given a ``recording`` (``recorded_session``), from it
  alone, each recorded exchange once (a result set, OK or a server error); a statement with
  no answer gets an error and is kept in ``unanswered``, so a test fails on any statement it
  did not expect;
- ``COM_REGISTER_SLAVE`` and ``COM_PING`` (OK), ``COM_QUIT``;
- ``COM_BINLOG_DUMP``: an artificial ROTATE, the file's FORMAT_DESCRIPTION (artificial
  when the dump starts past it), the events from the asked offset on, the files after it,
  then a HEARTBEAT every ``heartbeat_s`` until the client goes away;
- ``COM_BINLOG_DUMP_GTID`` (a GTID set instead of a file and offset), as MySQL's
  ``mysql_binlog_send`` does: from the last file whose PREVIOUS_GTIDS the set holds, every
  event group whose GTID the set lacks.

Result sets use the classic EOF packets (``CLIENT_DEPRECATE_EOF`` is not offered).
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from connectors.mariadb.gtid import GtidSet
from tests.connectors.mysql.binlog_encoder import (
    BinlogFile,
    artificial_rotate,
    as_artificial,
    heartbeat,
    packed,
)
from tests.connectors.mysql.fake_auth import ER_ACCESS_DENIED, PLUGIN, Sha2Auth

COM_QUIT, COM_QUERY, COM_PING, COM_BINLOG_DUMP, COM_REGISTER_SLAVE = 1, 3, 14, 0x12, 0x15
COM_BINLOG_DUMP_GTID = 0x1E
GTID_LOG_EVENT, PREVIOUS_GTIDS_LOG_EVENT = 33, 35
# Capability flags offered: LONG_PASSWORD, FOUND_ROWS, LONG_FLAG, CONNECT_WITH_DB,
# PROTOCOL_41, TRANSACTIONS, SECURE_CONNECTION, MULTI_RESULTS, PLUGIN_AUTH.
CAPABILITIES = 0x1 | 0x2 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x20000 | 0x80000
CLIENT_SSL, CLIENT_SECURE_CONNECTION = 0x800, 0x8000
SSL_REQUEST_SIZE = 32  # a client asking for TLS sends this much of its answer first
SERVER_STATUS_AUTOCOMMIT = 0x0002
NONCE = b"abcdefgh" + b"ijklmnopqrst"  # the handshake's scramble (20 bytes)
LONGLONG, VAR_STRING = 8, 253  # column types of result sets
BINARY_COLLATION, UTF8MB4_GENERAL_CI = 63, 45
ER_PARSE_ERROR = 1064

Value = int | str | None


@dataclass(frozen=True, slots=True)
class ResultSet:
    """A query's answer: column names and rows (ints become BIGINT columns, else text)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Value, ...], ...] = ()

    def __post_init__(self) -> None:
        if any(len(row) != len(self.columns) for row in self.rows):
            raise ValueError("every row needs one value per column")


OK = None  # an answer that is an OK packet (SET statements)


@dataclass(frozen=True, slots=True)
class ServerError:
    """A query's answer that is an error packet (the server's error number and message)."""

    code: int
    message: str


class Replay(Protocol):
    """Answers from a recorded session (``recorded_session.Recording``)."""

    def answer(self, sql: str) -> ResultSet | ServerError | None:
        """The recorded answer to ``sql``; raises ``LookupError`` when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class Answer:
    """The answer to every statement ``pattern`` matches (``re.fullmatch``, ignoring case)."""

    pattern: str
    result: ResultSet | None


def mysql_answers(
    binlog_end: tuple[str, int],
    version: str = "8.0.36",
    comment: str = "MySQL Community Server - GPL",
    settings: dict[str, str] | None = None,
) -> list[Answer]:
    """What a MySQL 8 server set up for replcheck answers to the reader's statements."""
    values = {
        "log_bin": "1",
        "binlog_format": "ROW",
        "binlog_row_metadata": "FULL",
        "binlog_row_image": "FULL",
        "binlog_transaction_compression": "OFF",
        "binlog_row_value_options": "",
        "binlog_checksum": "CRC32",
        "gtid_mode": "ON",
        **(settings or {}),
    }
    status = "SHOW BINARY LOG STATUS" if version.startswith("8.4") else "SHOW MASTER STATUS"
    return [
        Answer("SET .*", OK),
        Answer(
            r"SELECT VERSION\(\), @@version_comment", ResultSet(("v", "c"), ((version, comment),))
        ),
        Answer(
            r"SELECT @@global.log_bin, @@global.binlog_format, @@global.binlog_row_metadata",
            ResultSet(
                ("log_bin", "format", "metadata"),
                ((int(values["log_bin"]), values["binlog_format"], values["binlog_row_metadata"]),),
            ),
        ),
        Answer(
            r"SHOW GLOBAL VARIABLES WHERE Variable_name IN .*",
            _variables(
                values, "binlog_transaction_compression", "binlog_row_value_options", "gtid_mode"
            ),
        ),
        Answer(
            status,
            ResultSet(
                ("File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB", "Executed_Gtid_Set"),
                ((binlog_end[0], binlog_end[1], "", "", ""),),
            ),
        ),
        Answer(
            "SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'", _variables(values, "binlog_checksum")
        ),
        Answer(
            "SHOW VARIABLES LIKE 'BINLOG_ROW_METADATA';", _variables(values, "binlog_row_metadata")
        ),
        Answer(
            "SELECT @@global.binlog_row_image", ResultSet(("i",), ((values["binlog_row_image"],),))
        ),
        Answer(
            r"SELECT TABLE_TYPE FROM information_schema.TABLES .*",
            ResultSet(("TABLE_TYPE",), (("BASE TABLE",),)),
        ),
        Answer(  # the reader's column types (MySQL has no UUID type: none to find)
            r"SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS .*",
            ResultSet(("COLUMN_NAME", "DATA_TYPE")),
        ),
        Answer(
            r"SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS .*",
            ResultSet(("COLUMN_NAME", "COLUMN_TYPE")),
        ),
    ]


def _variables(values: dict[str, str], *names: str) -> ResultSet:
    return ResultSet(("Variable_name", "Value"), tuple((name, values[name]) for name in names))


@dataclass
class FakeMySQLServer:
    """A fake MySQL server on 127.0.0.1 (use it as a context manager).

    Args:
        files: The binlog files, in order.
        answers: The recorded answers to ``COM_QUERY`` statements.
        version: The version the handshake announces.
        heartbeat_s: How often a dump that reached the end sends a heartbeat.
        recording: A recorded session: it alone answers ``COM_QUERY`` (``answers`` unused).
        auth: ``caching_sha2_password`` with one password (None: any password, natively).
    """

    files: Sequence[BinlogFile]
    answers: Sequence[Answer]
    version: str = "8.0.36"
    heartbeat_s: float = 0.05
    recording: Replay | None = None
    auth: Sha2Auth | None = None
    statements: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    dumps: list[tuple[str, int]] = field(default_factory=list)
    gtid_dumps: list[str] = field(default_factory=list)
    _listener: socket.socket | None = None
    _stopped: threading.Event = field(default_factory=threading.Event)
    _clients: list[socket.socket] = field(default_factory=list)

    @property
    def port(self) -> int:
        assert self._listener is not None
        return int(self._listener.getsockname()[1])

    def url(self, database: str) -> str:
        """A SQLAlchemy URL of the server (user ``repl``, no password)."""
        return f"mysql+pymysql://repl@127.0.0.1:{self.port}/{database}"

    def __enter__(self) -> FakeMySQLServer:
        self._listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        assert self._listener is not None
        self._listener.close()
        for client in list(self._clients):
            with contextlib.suppress(OSError):
                client.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._clients.append(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        session = _Session(self, client)
        with contextlib.suppress(OSError, ConnectionError), contextlib.closing(client):
            session.run()

    def answer(self, sql: str) -> ResultSet | ServerError | None:
        """The recorded answer to ``sql``.

        Raises:
            LookupError: There is none.
        """
        self.statements.append(sql)
        if self.recording is not None:
            try:
                return self.recording.answer(sql)
            except LookupError:
                self.unanswered.append(sql)
                raise
        for answer in self.answers:
            if re.fullmatch(answer.pattern, sql.strip(), re.IGNORECASE | re.DOTALL):
                return answer.result
        self.unanswered.append(sql)
        raise LookupError(sql)

    def iter_dump(self, file_name: str, offset: int) -> Iterator[bytes]:
        """The events a dump from ``file_name:offset`` sends, then heartbeats forever."""
        self.dumps.append((file_name, offset))
        names = [binlog.name for binlog in self.files]
        index = names.index(file_name)
        yield artificial_rotate(file_name, offset)
        for number, binlog in enumerate(self.files[index:]):
            first, fde = binlog.events[0]
            start = offset if number == 0 else first
            yield fde if start <= first else as_artificial(fde)
            yield from (event for at, event in binlog.events[1:] if at >= start)
        last = self.files[-1]
        while not self._stopped.wait(self.heartbeat_s):
            yield heartbeat(last.name, last.position)

    def iter_gtid_dump(self, executed: GtidSet) -> Iterator[bytes]:
        """The events a dump after the GTID set ``executed`` sends, then heartbeats."""
        self.gtid_dumps.append(str(executed))
        held = [i for i, f in enumerate(self.files) if _previous_gtids(f).issubset(executed)]
        index = max(held, default=0)
        yield artificial_rotate(self.files[index].name, 4)
        for binlog in self.files[index:]:
            skipping = False
            for _, event in binlog.events:
                if event[4] == GTID_LOG_EVENT:
                    sid, (gno,) = uuid.UUID(bytes=event[20:36]), struct.unpack_from("<q", event, 36)
                    skipping = (str(sid), gno) in executed
                if not skipping:
                    yield event
        last = self.files[-1]
        while not self._stopped.wait(self.heartbeat_s):
            yield heartbeat(last.name, last.position)


def _previous_gtids(binlog: BinlogFile) -> GtidSet:
    """The PREVIOUS_GTIDS of a file (empty when it has none)."""
    for _, event in binlog.events:
        if event[4] == PREVIOUS_GTIDS_LOG_EVENT:
            return GtidSet.decode(event[19:])
    return GtidSet()


def _dump_gtid_set(body: bytes) -> GtidSet:
    """The GTID set of a ``COM_BINLOG_DUMP_GTID`` (after its command byte): flags (2),
    server id (4), file name length (4) and name, position (8), data size (4), data."""
    (name_size,) = struct.unpack_from("<I", body, 6)
    at = 10 + name_size + 8 + 4
    return GtidSet.decode(body[at:])


class _Session:
    """One client connection."""

    def __init__(self, server: FakeMySQLServer, client: socket.socket) -> None:
        self.server = server
        self.client = client
        self.sequence = 0

    def run(self) -> None:
        if not self._handshake():
            return
        while True:
            packet = self._read()
            command, body = packet[0], packet[1:]
            if command == COM_QUIT:
                return
            if command == COM_QUERY:
                self._query(body.decode())
            elif command in (COM_PING, COM_REGISTER_SLAVE):
                self._ok()
            elif command == COM_BINLOG_DUMP:
                offset, _, _ = struct.unpack_from("<IHI", body)
                for event in self.server.iter_dump(body[10:].decode(), offset):
                    self._write(b"\x00" + event)
                return
            elif command == COM_BINLOG_DUMP_GTID:
                for event in self.server.iter_gtid_dump(_dump_gtid_set(body)):
                    self._write(b"\x00" + event)
                return
            else:
                self._error(ER_PARSE_ERROR, f"the fake server has no command {command}")

    def _handshake(self) -> bool:
        """Greet the client and authenticate it; whether it got in."""
        auth = self.server.auth
        tls = auth.tls if auth is not None else None
        capabilities = CAPABILITIES | (CLIENT_SSL if tls is not None else 0)
        plugin = PLUGIN if auth is not None else "mysql_native_password"
        greeting = (
            bytes([10])
            + self.server.version.encode()
            + b"\0"
            + struct.pack("<I", 1)
            + NONCE[:8]
            + b"\0"
            + struct.pack(
                "<HBHH", capabilities & 0xFFFF, 255, SERVER_STATUS_AUTOCOMMIT, capabilities >> 16
            )
            + bytes([21])
            + b"\0" * 10
            + NONCE[8:]
            + b"\0"
            + plugin.encode()
            + b"\0"
        )
        self.sequence = 0
        self._write(greeting)
        answer = self._read()
        secure = tls is not None and len(answer) == SSL_REQUEST_SIZE
        if secure:
            assert tls is not None
            self.client = tls.wrap_socket(self.client, server_side=True)
            answer = self._read()
        if auth is None or auth.admits(self, _auth_answer(answer), NONCE, secure):
            self._ok()
            return True
        self._error(
            ER_ACCESS_DENIED, "Access denied for user 'repl'@'127.0.0.1' (using password: YES)"
        )
        return False

    def read(self) -> bytes:
        """The client's next packet (``fake_auth.Exchange``)."""
        return self._read()

    def write(self, payload: bytes) -> None:
        """Send one packet (``fake_auth.Exchange``)."""
        self._write(payload)

    def _query(self, sql: str) -> None:
        try:
            result = self.server.answer(sql)
        except LookupError:
            self._error(ER_PARSE_ERROR, f"the fake server has no answer for: {sql}")
            return
        if result is None:
            self._ok()
            return
        if isinstance(result, ServerError):
            self._error(result.code, result.message)
            return
        self._write(packed(len(result.columns)))
        for index, name in enumerate(result.columns):
            numeric = any(isinstance(row[index], int) for row in result.rows)
            self._write(_column_definition(name, numeric))
        self._eof()
        for row in result.rows:
            self._write(b"".join(_text_value(value) for value in row))
        self._eof()

    def _ok(self) -> None:
        self._write(b"\x00\x00\x00" + struct.pack("<HH", SERVER_STATUS_AUTOCOMMIT, 0))

    def _eof(self) -> None:
        self._write(b"\xfe" + struct.pack("<HH", 0, SERVER_STATUS_AUTOCOMMIT))

    def _error(self, code: int, message: str) -> None:
        self._write(b"\xff" + struct.pack("<H", code) + b"#42000" + message.encode())

    def _read(self) -> bytes:
        header = self._receive(4)
        length = int.from_bytes(header[:3], "little")
        self.sequence = (header[3] + 1) % 256
        return self._receive(length)

    def _receive(self, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = self.client.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the client closed the connection")
            data += chunk
        return data

    def _write(self, payload: bytes) -> None:
        header = len(payload).to_bytes(3, "little") + bytes([self.sequence])
        self.sequence = (self.sequence + 1) % 256
        self.client.sendall(header + payload)


def _auth_answer(packet: bytes) -> bytes:
    """The authentication answer of a HandshakeResponse41 (after the user name)."""
    (flags,) = struct.unpack_from("<I", packet)
    at = packet.index(b"\0", SSL_REQUEST_SIZE) + 1
    if flags & CLIENT_SECURE_CONNECTION:
        return packet[at + 1 : at + 1 + packet[at]]
    return packet[at : packet.index(b"\0", at)]


def _column_definition(name: str, numeric: bool) -> bytes:
    """Protocol::ColumnDefinition41 of a result-set column."""
    text = name.encode()
    kind, collation = (LONGLONG, BINARY_COLLATION) if numeric else (VAR_STRING, UTF8MB4_GENERAL_CI)
    return (
        b"".join(packed(len(part)) + part for part in (b"def", b"", b"", b"", text, text))
        + bytes([0x0C])
        + struct.pack("<HIBHB", collation, 255, kind, 0, 0)
        + b"\0\0"
    )


def _text_value(value: Value) -> bytes:
    if value is None:
        return b"\xfb"
    data = str(value).encode()
    return packed(len(data)) + data
