"""What an Oracle log source is configured with: the LogMiner reader's settings.

The fields of ``LogMinerConfig`` are the one list of the settings' names: each is a query
parameter of the connection's URL (so a YAML connection sets them in its ``url:``), read by
``from_url``, and ``LOG_PARAMETERS`` (which the validator's reads leave out) is built from
them. For example::

    oracle+oracledb://cdc@adg1:1521/?service_name=SALES&mining=standby
        &dictionary=flat_file:/u01/logmnr/dictionary.ora&window_scns=50000&archive_dest=1,2
        &mining_instance=logmnr1:1521/LOGMNR

Each value is checked when the source is opened (``__post_init__``), and each error says
what to run on the server. The reader checks the database against them when it starts
(``OracleLogReader.iter_changes``: database role, dictionary, archive destinations).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cdc_core.errors import ConfigError
from connectors.urls import parse_url

MiningMode = Literal["primary", "standby"]
RacMode = Literal["refuse", "archived_logs"]
DictionaryKind = Literal["online_catalog", "redo_logs", "flat_file"]
MAX_ARCHIVE_DEST = 31  # LOG_ARCHIVE_DEST_1 .. LOG_ARCHIVE_DEST_31 (Oracle Database Reference)
BUILD_IN_REDO = (
    "EXECUTE DBMS_LOGMNR_D.BUILD(OPTIONS => DBMS_LOGMNR_D.STORE_IN_REDO_LOGS);"
    " ALTER SYSTEM ARCHIVE LOG CURRENT;"
)
"""Extracts the dictionary into the redo (on the primary; a standby receives it with the
redo), then archives it so the reader finds it (Oracle Database Utilities, "LogMiner",
"Extracting the LogMiner Dictionary to the Redo Log Files")."""
BUILD_FLAT_FILE = (
    "EXECUTE DBMS_LOGMNR_D.BUILD(DICTIONARY_FILENAME => '<file>', DICTIONARY_LOCATION =>"
    " '<directory>', OPTIONS => DBMS_LOGMNR_D.STORE_IN_FLAT_FILE);"
)
"""Writes the dictionary to a flat file on the server ("Extracting the LogMiner Dictionary
to a Flat File"); rebuild it after DDL of a captured table."""


@dataclass(frozen=True, slots=True)
class Dictionary:
    """Where LogMiner takes table definitions from: ``online_catalog`` (the tables as they
    are now), ``redo_logs`` (the dictionary extracted into the redo, followed across DDL by
    DDL_DICT_TRACKING) or ``flat_file:<path>`` (a file on the server)."""

    kind: DictionaryKind = "online_catalog"
    path: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("online_catalog", "redo_logs", "flat_file"):
            raise ConfigError(
                f"Oracle dictionary {self.kind!r} is unknown: write online_catalog, redo_logs"
                " or flat_file:<path on the server>"
            )
        if (self.kind == "flat_file") != bool(self.path):
            raise ConfigError(
                "an Oracle flat-file dictionary is written flat_file:<path on the server>;"
                f" build the file on the server with {BUILD_FLAT_FILE}"
            )

    @classmethod
    def from_text(cls, text: str) -> Dictionary:
        """``online_catalog``, ``redo_logs`` or ``flat_file:<path>``."""
        kind, _, path = text.partition(":")
        return cls(kind, path or None)  # type: ignore[arg-type]  # __post_init__ checks it

    def to_text(self) -> str:
        """The form ``from_text`` reads."""
        return self.kind if self.path is None else f"{self.kind}:{self.path}"


def _mining(text: str) -> str:
    return text


_INSTANCE = re.compile(r"^[\w.-]+(:\d+)?/[\w.$#-]+$")


def _instance(text: str) -> str | None:
    """``host[:port]/service``: Easy Connect without a protocol (ValueError otherwise)."""
    if text and not _INSTANCE.match(text):
        raise ValueError(text)
    return text or None


def _rac(text: str) -> str:
    if text not in ("refuse", "archived_logs"):
        raise ValueError(text)
    return text


def _destinations(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def _table(text: str) -> str | None:
    return text or None


def _setting(parse: Callable[[str], Any], doc: str) -> dict[str, Any]:
    """A field's metadata: how its URL parameter is read, and what it takes."""
    return {"parse": parse, "doc": doc}


@dataclass(frozen=True, slots=True)
class LogMinerConfig:
    """The Oracle log reader's section of the configuration (each field is a URL parameter;
    ``doc`` in its metadata says what it takes)."""

    mining: MiningMode = field(
        default="primary",
        metadata=_setting(_mining, "primary | standby (Active Data Guard, never written)"),
    )
    dictionary: Dictionary = field(
        default=Dictionary(),
        metadata=_setting(Dictionary.from_text, "online_catalog | redo_logs | flat_file:<path>"),
    )
    window_scns: int = field(
        default=100_000, metadata=_setting(int, "the most SCNs one LogMiner session covers")
    )
    archive_dest: tuple[int, ...] = field(
        default=(),
        metadata=_setting(_destinations, "DEST_IDs to read archived logs from, e.g. 1,2"),
    )
    poll_interval_s: float = field(
        default=1.0, metadata=_setting(float, "seconds to wait when caught up")
    )
    flush_table: str | None = field(
        default="REPLCHECK_LOGMNR_FLUSH",
        metadata=_setting(_table, "the table updated to flush the log buffer (empty: none)"),
    )
    server_time_zone: str | None = field(
        default=None, metadata=_setting(_table, "the IANA zone of the server's clock")
    )
    rac: RacMode = field(
        default="refuse",
        metadata=_setting(_rac, "refuse | archived_logs (RAC: mine archived logs only)"),
    )
    mining_instance: str | None = field(
        default=None,
        metadata=_setting(
            _instance, "host:port/service of an instance that runs LogMiner (same user)"
        ),
    )

    def __post_init__(self) -> None:
        if self.mining not in ("primary", "standby"):
            raise ConfigError(
                f"Oracle mining={self.mining!r} is unknown: write mining=primary, or"
                " mining=standby to mine on an Active Data Guard standby"
            )
        if self.window_scns < 1:
            raise ConfigError("oracle window_scns must be >= 1")
        if self.poll_interval_s < 0:
            raise ConfigError("oracle poll_interval_s must be >= 0")
        if self.mining_instance and self.dictionary.kind == "online_catalog":
            raise ConfigError(
                "Oracle mining_instance mines the database's logs elsewhere, whose own catalog"
                " does not describe the mined tables: set dictionary=redo_logs, or"
                " dictionary=flat_file:<path the mining instance reads> built with"
                f" {BUILD_FLAT_FILE}",
                {"parameter": "mining_instance"},
            )
        bad = [dest for dest in self.archive_dest if not 1 <= dest <= MAX_ARCHIVE_DEST]
        if bad or len(set(self.archive_dest)) != len(self.archive_dest):
            raise ConfigError(
                f"oracle archive_dest={list(self.archive_dest)} must be distinct DEST_IDs from 1"
                f" to {MAX_ARCHIVE_DEST}; list them with SELECT DEST_ID, DEST_NAME, STATUS,"
                " TYPE FROM V$ARCHIVE_DEST_STATUS"
            )

    @property
    def flushes(self) -> bool:
        """Whether the reader writes the flush table (never on a standby: it is read-only;
        nor when it mines archived logs only, which are whole)."""
        return self.mining == "primary" and self.flush_table is not None and self.rac == "refuse"


LOG_PARAMETERS = tuple(setting.name for setting in dataclasses.fields(LogMinerConfig))
"""The URL query parameters of an Oracle log source (the fields of ``LogMinerConfig``)."""


def is_log_parameter(name: str) -> bool:
    """Whether a URL query parameter is the log source's (not the driver's)."""
    return name in LOG_PARAMETERS


def from_url(url: str) -> LogMinerConfig:
    """The reader's settings from the query parameters of ``url`` (others are the driver's).

    Raises:
        ConfigError: A value of the wrong kind, one given twice, or a contradiction.
    """
    return from_parameters(parse_url(url).query)


def from_parameters(query: Mapping[str, str | tuple[str, ...]]) -> LogMinerConfig:
    """The reader's settings from ``{parameter: value}`` (``from_url``'s query)."""
    values: dict[str, Any] = {}
    for setting in dataclasses.fields(LogMinerConfig):
        text = query.get(setting.name)
        if text is None:
            continue
        if isinstance(text, tuple):
            raise ConfigError(f"Oracle URL parameter {setting.name} is given more than once")
        try:
            values[setting.name] = setting.metadata["parse"](text)
        except ValueError as exc:
            raise ConfigError(
                f"Oracle URL parameter {setting.name}={text!r} is not valid: it takes"
                f" {setting.metadata['doc']}",
                {"parameter": setting.name},
            ) from exc
    if values.get("mining") == "standby" and values.get("flush_table"):
        raise ConfigError(
            "Oracle flush_table cannot be used with mining=standby: a read-only standby"
            " cannot be written; leave flush_table out",
            {"parameter": "flush_table"},
        )
    return LogMinerConfig(**values)
