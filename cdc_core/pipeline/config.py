"""The ``pipelines:`` section of the configuration file (shared with the validator's).

```yaml
connections:
  shop_src: {url: "mysql+pymysql://repl@127.0.0.1:3306/shop", password: {env: SHOP_PW}}
  lake:     {lake: /data/lake}
pipelines:
  - name: shop
    source: shop_src                  # a connection with a url
    target: lake                      # a connection with a lake, or a database (url):
    # target_schema: replica            # database target: the schema every table goes to
    # conflicts: stop                   # database target: stop | overwrite (README)
    tables: [shop.orders, shop.customers]
    # or, instead of tables, a policy (globs over schema.table):
    # filter: {policy: accept, drop: ["shop.audit_*"]}
    # filter: {policy: drop, accept: ["shop.*"]}
    ignore_columns: {shop.orders: [internal_note]}
    state_dir: /var/lib/replcheck/shop      # checkpoints, spill segments, row image store
    buffer: {memory_budget_mb: 256, max_transaction_age_s: 3600, max_transaction_changes: 1000000}
    batch: {max_events: 50000, max_seconds: 2}
    refresh: {chunk_rows: 10000}   # rows per snapshot chunk of a table refresh
    retry: {attempts: 10, first_wait_s: 1, max_wait_s: 60}   # a lost source (RetryPolicy)
```
Unknown keys are errors naming the key and line; ``REPLCHECK__PIPELINES__0__STATE_DIR``
style environment variables and ``--set`` flags override the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from cdc_core.capture.filters import TableFilter
from cdc_core.config import SECTIONS, ConnectionConfig, Section, load_root, read_connections
from cdc_core.errors import ConfigError
from cdc_core.lake_location import LakeLocation
from cdc_core.names import parse_table
from cdc_core.rebuild.full_width import FetchMissing, FetchUnavailable


@dataclass(frozen=True, slots=True)
class PipelineConfig:
    """One pipeline's section of the configuration.

    Args:
        name: Names the pipeline's app transactions and progress file in the lake (or its
            rows in a database target's progress table).
        lake: The lake's root directory (None: the target is a database).
        state_dir: Checkpoints, spill segments and the row image store (one pipeline's).
        tables: Which tables are captured and which columns ignored.
        memory_budget_bytes: The transaction buffer's memory budget.
        batch_max_events: Write a batch once it holds this many events...
        batch_max_seconds: ...or once it is this old.
        max_transaction_age: Warn about a transaction open longer (never drops it).
        max_transaction_changes: Warn about a transaction with more changes.
        fetch_missing: The hook reading a row the image store does not know (any table).
        fetch_unavailable: Per table, a hook reading columns the log could not render, as
            of a transaction's commit (``cdc_core.capture.events.UNAVAILABLE``).
        refresh_chunk_rows: Rows per snapshot chunk of a table refresh.
    """

    name: str
    lake: Path | LakeLocation | None  # an object-store lake: cdc_core.lake_location
    state_dir: Path  # always local, also for an object-store lake
    tables: TableFilter
    memory_budget_bytes: int = 256 << 20
    batch_max_events: int = 50_000
    batch_max_seconds: float = 2.0
    max_transaction_age: timedelta | None = None
    max_transaction_changes: int | None = None
    fetch_missing: FetchMissing | None = None
    fetch_unavailable: Mapping[str, FetchUnavailable] = field(default_factory=dict)
    refresh_chunk_rows: int = 10_000

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ConfigError(f"pipeline name {self.name!r} must be letters, digits, - and _")
        if self.batch_max_events < 1 or self.batch_max_seconds <= 0:
            raise ConfigError("batch_max_events and batch_max_seconds must be positive")
        if self.refresh_chunk_rows < 1:
            raise ConfigError("refresh.chunk_rows must be positive")


_PIPELINE_KEYS = (
    "name",
    "source",
    "target",
    "tables",
    "filter",
    "ignore_columns",
    "state_dir",
    "buffer",
    "batch",
    "refresh",
    "target_schema",
    "conflicts",
    "retry",
)

_BUFFER_KEYS = ("memory_budget_mb", "max_transaction_age_s", "max_transaction_changes")
_RETRY_KEYS = ("attempts", "first_wait_s", "max_wait_s")


CONFLICT_POLICIES = ("stop", "overwrite")
"""What a database target does with a delete of an absent row or an insert of a present
one: stop naming the table and key, or apply the change anyway and count it."""


@dataclass(frozen=True, slots=True)
class TargetOptions:
    """How a pipeline writes to a database target.

    Attributes:
        schema: The target schema (database) every captured table goes to (None: a schema
            named as the source table's).
        conflicts: One of ``CONFLICT_POLICIES``.
    """

    schema: str | None = None
    conflicts: str = "stop"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How ``replcheck cdc run`` retries a source it lost (``validator.commands.cdc``).

    A lost source is a ``TransientError`` while the pipeline runs (the server closed the
    connection, cannot be reached, or its replication slot is still held). Each attempt
    waits, then opens the pipeline again from its checkpoint; the waits double from
    ``first_wait_s`` up to ``max_wait_s``, as Debezium's reconnection backoff does. The
    count starts again once the lake has moved on after a reconnection.

    Attributes:
        attempts: Attempts after a loss before ``cdc run`` gives up (0: it exits at once).
        first_wait_s: The wait before the first attempt, in seconds.
        max_wait_s: The longest wait between two attempts, in seconds.
    """

    attempts: int = 10
    first_wait_s: float = 1.0
    max_wait_s: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts < 0:
            raise ConfigError("retry.attempts must be 0 (no retry) or more")
        if self.first_wait_s <= 0 or self.max_wait_s < self.first_wait_s:
            raise ConfigError("retry waits must be positive, first_wait_s <= max_wait_s")

    def wait_before(self, attempt: int) -> float:
        """The wait before attempt ``attempt`` (1, 2, ...): doubling, at most max_wait_s."""
        return min(self.first_wait_s * 2.0 ** min(attempt - 1, 64), self.max_wait_s)


@dataclass(frozen=True, slots=True)
class PipelineSetup:
    """A pipeline's configuration and the connection of its source."""

    config: PipelineConfig
    source: ConnectionConfig
    target: ConnectionConfig
    target_options: TargetOptions = field(default_factory=lambda: TargetOptions())
    retry: RetryPolicy = field(default_factory=lambda: RetryPolicy())


def load_pipeline_config(
    path: Path | str,
    name: str,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> PipelineSetup:
    """Read the pipeline called ``name`` from a config file, with overrides applied."""
    environ = os.environ if environ is None else environ
    root = load_root(path, overrides, environ, SECTIONS, ("connections", "pipelines"))
    connections = read_connections(root, environ)
    sections = list(root.items("pipelines"))
    for section in sections:
        section.check_keys(_PIPELINE_KEYS, required=("name", "source", "target", "state_dir"))
        if section.require("name", str) == name:
            return _read_pipeline(section, connections)
    names = [section.require("name", str) for section in sections]
    raise root.error("pipelines", f"has no pipeline named {name!r} (it has {names})")


def _read_pipeline(section: Section, connections: Mapping[str, ConnectionConfig]) -> PipelineSetup:
    source = _connection(section, "source", connections, lake=False)
    target = _connection(section, "target", connections, lake=None)
    if target.url is not None and target.url == source.url:
        raise section.error(
            "target", "is the pipeline's source: write to a lake or another database"
        )
    options = _target_options(section, target)
    buffer = _numbers(section, "buffer", _BUFFER_KEYS)
    batch = _numbers(section, "batch", ("max_events", "max_seconds"))
    refresh = _numbers(section, "refresh", ("chunk_rows",))
    age = buffer.get("max_transaction_age_s")
    config = PipelineConfig(
        name=section.require("name", str),
        lake=target.lake,
        state_dir=Path(section.require("state_dir", str)),
        tables=_read_filter(section),
        memory_budget_bytes=int(buffer.get("memory_budget_mb", 256) * (1 << 20)),
        batch_max_events=int(batch.get("max_events", 50_000)),
        batch_max_seconds=float(batch.get("max_seconds", 2.0)),
        max_transaction_age=timedelta(seconds=age) if age is not None else None,
        max_transaction_changes=_optional_int(buffer.get("max_transaction_changes")),
        refresh_chunk_rows=int(refresh.get("chunk_rows", 10_000)),
    )
    return PipelineSetup(config, source, target, options, _retry_policy(section))


def _target_options(section: Section, target: ConnectionConfig) -> TargetOptions:
    schema = section.get("target_schema", str)
    conflicts = section.get("conflicts", str, "stop") or "stop"
    if target.is_lake and (schema is not None or "conflicts" in section.data):
        raise section.error("target_schema", "and conflicts apply to a database target only")
    if conflicts not in CONFLICT_POLICIES:
        raise section.error("conflicts", f"must be one of {list(CONFLICT_POLICIES)}")
    return TargetOptions(schema, conflicts)


def _connection(
    section: Section, key: str, connections: Mapping[str, ConnectionConfig], *, lake: bool | None
) -> ConnectionConfig:
    name = section.require(key, str)
    if name not in connections:
        raise section.error(key, f"names connection {name!r}, which is not in 'connections'")
    connection = connections[name]
    if lake is not None and connection.is_lake != lake:
        wanted = "a lake connection ({lake: PATH})" if lake else "a database connection (url)"
        raise section.error(key, f"must be {wanted}; {name!r} is not")
    return connection


def _retry_policy(section: Section) -> RetryPolicy:
    """``retry: {attempts, first_wait_s, max_wait_s}``; each key absent keeps its default."""
    child = section.optional_child("retry")
    if child is None:
        return RetryPolicy()
    child.check_keys(_RETRY_KEYS)
    default = RetryPolicy()
    attempts = child.get("attempts", int, default.attempts)
    first = child.get("first_wait_s", float, default.first_wait_s)
    longest = child.get("max_wait_s", float, default.max_wait_s)
    assert attempts is not None and first is not None and longest is not None
    if attempts < 0:
        raise child.error("attempts", "must be 0 (exit at once) or more")
    for key, value in (("first_wait_s", first), ("max_wait_s", longest)):
        if value <= 0:
            raise child.error(key, "must be positive")
    if longest < first:
        raise child.error("max_wait_s", f"must be at least first_wait_s ({first:g})")
    return RetryPolicy(attempts, first, longest)


def _numbers(section: Section, key: str, allowed: tuple[str, ...]) -> dict[str, float]:
    child = section.optional_child(key)
    if child is None:
        return {}
    child.check_keys(allowed)
    values = {name: child.get(name, float) for name in allowed}
    for name, value in values.items():
        if value is not None and value <= 0:
            raise child.error(name, "must be positive")
    return {name: value for name, value in values.items() if value is not None}


def _optional_int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _read_filter(section: Section) -> TableFilter:
    tables = section.names("tables") if "tables" in section.data else None
    policy = section.optional_child("filter")
    if (tables is None) == (policy is None):
        raise section.error(None, "give exactly one of 'tables' (a list) or 'filter' (a policy)")
    ignored = _ignored_columns(section)
    if tables is not None:
        for table in tables:
            try:
                parse_table(table)
            except ConfigError as exc:
                raise section.error("tables", exc.message) from exc
        return TableFilter("drop", accept=tables, ignore_columns=ignored)
    assert policy is not None
    policy.check_keys(("policy", "accept", "drop"), required=("policy",))
    kind = policy.require("policy", str)
    if kind not in ("accept", "drop"):
        raise policy.error("policy", f"must be accept or drop, not {kind!r}")
    other = "drop" if kind == "accept" else "accept"
    wrong = kind  # the accept policy lists what it drops, and the other way round
    if wrong in policy.data:
        raise policy.error(wrong, f"the {kind} policy takes {other!r} patterns, not {wrong!r}")
    patterns = policy.names(other) if other in policy.data else ()
    if kind == "accept":
        return TableFilter("accept", drop=patterns, ignore_columns=ignored)
    return TableFilter("drop", accept=patterns, ignore_columns=ignored)


def _ignored_columns(section: Section) -> dict[str, frozenset[str]]:
    child = section.optional_child("ignore_columns")
    if child is None:
        return {}
    return {table: frozenset(child.names(table)) for table in child.data}
