"""The validator's configuration: connections, comparisons and run settings.

A minimal file::

    connections:
      shop_src: {url: "mysql+pymysql://user@127.0.0.1:3306/shop", password: {env: SHOP_PW}}
      lake:     {lake: "/data/lake"}
    comparisons:
      - name: orders
        source: {connection: shop_src, table: orders}
        target: {connection: lake, table: shop.orders}
        key: [id]                      # optional when the source has a primary key
        columns: {exclude: [etl_loaded_at], map: {customer: customer_id}, sensitive: [email]}
        options: {timestamp_precision: 3, float_digits: 12, trim_char: true}

``columns.map`` maps source column names to target column names; ``columns.boolean`` lists
integer columns compared as booleans (MariaDB's BOOLEAN is TINYINT(1)). ``options`` takes the
keys of ``merkle.options.ComparisonOptions`` plus ``depth`` / ``rows_per_leaf`` (tree size).

``validation.engine`` (or a comparison's own ``engine``) says who computes the digests:
``auto`` (the default) lets two databases that can compute their own do so, with no Spark
and no full read (``connectors.pushdown``); against a lake target it lets such a source
compute its own while DuckDB on this machine hashes the lake (``local``: no Spark), or
Spark does where DuckDB cannot hash a column exactly or the comparison has expectations
(``hybrid``); it uses Spark alone otherwise (JSON columns, ``float_digits``, ...);
``spark``, ``database``, ``hybrid`` and ``local`` insist on one engine.
``validation.database_parallelism`` is how many connections each database reads on.

``validation.incremental: true`` (hybrid and local engines, integer keys) keeps each validated run's
leaf digests in the lake and re-hashes only the leaves the changelog shows changed since,
plus a rotating sweep of ``validation.sweep_share`` of the others (``validator.incremental``);
``validation.force_full: true`` (``--full``) makes one run re-hash everything.

``expectations`` (optional) is a data-quality suite checked with Great Expectations on the
target as materialised at the agreed position (``validator.expectations``). Columns are
named as in the target; a failed expectation makes the comparison fail like a difference::

    expectations:
      - {kind: key_not_null_unique}                    # the comparison's key columns
      - {kind: not_null, column: customer_id}
      - {kind: unique, column: ref, mostly: 0.99}      # mostly: share of rows that must pass
      - {kind: between, column: amount, min: 0, max: 10000}   # min or max may be left out
      - {kind: in_set, column: status, values: [new, paid, shipped]}
      - {kind: regex, column: email, pattern: '^[^@]+@[^@]+$'}
      - {kind: row_count, tolerance: 0.5%}   # of the source's rows, or a number of rows: 10
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from cdc_core.config import (
    SECTIONS,
    ConnectionConfig,
    Secret,
    Section,
    load_root,
    read_connections,
    read_secret,
)
from cdc_core.errors import ConfigError, ContractError
from cdc_core.names import parse_table
from merkle.hashing import MAX_DEPTH
from merkle.options import ComparisonOptions
from merkle.tree import DEFAULT_ROWS_PER_LEAF
from validator.settings import IncrementalSettings

ENGINES = ("auto", "spark", "database", "hybrid", "local")
# Engines that compare a source database with a lake (its digests in SQL, the lake's in
# Spark or DuckDB), and those that fail a comparison they cannot run (auto falls back).
LAKE_ENGINES = ("hybrid", "local")
INSISTING_ENGINES = ("database", *LAKE_ENGINES)
# How a live database target is fed (validator.replicas): "replcheck" (a pipeline's progress
# table), "mariadb" (a MariaDB replica: GTID), "postgres" (a subscriber or standby: LSN),
# "none" (nothing in flight: no re-check), "unknown" (re-check after the lag).
REPLICATION_KINDS = ("replcheck", "mariadb", "mysql", "postgres", "none", "unknown")
_OPTION_KEYS = (
    "trim_char",
    "case_insensitive",
    "empty_string_is_null",
    "timestamp_precision",
    "timestamp_rounding",
    "float_digits",
)


@dataclass(frozen=True, slots=True)
class TableRef:
    """A table in a connection (``schema.table`` or ``table``)."""

    connection: str
    table: str


@dataclass(frozen=True, slots=True)
class ColumnRules:
    """Which columns take part, how source names map to target names, which are sensitive,
    and which integer columns hold booleans (source names; ``exclude`` also names a column
    only the target has, which is then no schema difference)."""

    exclude: tuple[str, ...] = ()
    rename: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    sensitive: tuple[str, ...] = ()
    boolean: tuple[str, ...] = ()

    def target_name(self, source_name: str) -> str:
        """The target's name for a source column."""
        return self.rename.get(source_name, source_name)


# Each expectation kind and the keys it takes besides ``kind`` (validator.expectations maps
# them onto Great Expectations classes).
EXPECTATION_KINDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "key_not_null_unique": (),
        "not_null": ("column", "mostly"),
        "unique": ("column", "mostly"),
        "between": ("column", "min", "max", "mostly"),
        "in_set": ("column", "values", "mostly"),
        "regex": ("column", "pattern", "mostly"),
        "row_count": ("tolerance",),
    }
)
Bound = int | float | str | dt.date
"""A ``between`` limit: a number, a date or timestamp (YAML or ISO text)."""
SetValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class ExpectationConfig:
    """One data-quality expectation on a comparison's target (see the module docstring).

    Attributes:
        kind: One of ``EXPECTATION_KINDS``.
        where: Where it was declared (file, line, key path), for errors found at run time.
        column: The target column (column kinds only).
        min_value: ``between``: lowest allowed value (inclusive), None for no limit.
        max_value: ``between``: highest allowed value (inclusive), None for no limit.
        values: ``in_set``: the allowed values.
        pattern: ``regex``: the pattern every non-NULL value must match.
        tolerance: ``row_count``: allowed distance from the source's row count.
        tolerance_percent: ``row_count``: ``tolerance`` is a percentage of the source's rows.
        mostly: Share of non-NULL rows that must pass (column kinds), 0 < mostly <= 1.
    """

    kind: str
    where: str = ""
    column: str | None = None
    min_value: Bound | None = None
    max_value: Bound | None = None
    values: tuple[SetValue, ...] = ()
    pattern: str | None = None
    tolerance: float = 0.0
    tolerance_percent: bool = False
    mostly: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in EXPECTATION_KINDS:
            raise ValueError(f"unknown expectation kind {self.kind!r}")
        if ("column" in EXPECTATION_KINDS[self.kind]) != (self.column is not None):
            raise ValueError(f"expectation {self.kind} needs a column exactly when it has one")
        if not 0 < self.mostly <= 1 or self.tolerance < 0:
            raise ValueError("mostly must be in (0, 1] and tolerance >= 0")

    def row_count_range(self, source_rows: int) -> tuple[int, int]:
        """``row_count``: the (lowest, highest) target row count allowed."""
        slack = source_rows * self.tolerance / 100 if self.tolerance_percent else self.tolerance
        # Inclusive; a fractional slack (a percentage) never widens the range by a whole row.
        return max(0, math.ceil(source_rows - slack)), math.floor(source_rows + slack)


@dataclass(frozen=True, slots=True)
class ComparisonConfig:
    """One source table compared with one target table."""

    name: str
    source: TableRef
    target: TableRef
    key: tuple[str, ...] = ()
    columns: ColumnRules = field(default_factory=ColumnRules)
    options: ComparisonOptions = field(default_factory=ComparisonOptions)
    depth: int | None = None
    rows_per_leaf: int = DEFAULT_ROWS_PER_LEAF
    expectations: tuple[ExpectationConfig, ...] = ()
    engine: str | None = None  # overrides validation.engine for this comparison
    replication: str = "unknown"  # how a live target is fed (REPLICATION_KINDS)

    @property
    def source_label(self) -> str:
        """The source as results name it: ``connection:table`` (never a URL or secret)."""
        return f"{self.source.connection}:{self.source.table}"

    @property
    def target_label(self) -> str:
        """The target as results name it: ``connection:table``."""
        return f"{self.target.connection}:{self.target.table}"


@dataclass(frozen=True, slots=True)
class SparkConfig:
    """Where and how the Spark jobs run."""

    master: str = "local[2]"
    conf: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    jdbc: bool = True  # read sources over JDBC where a driver jar is found (see sources.py)
    # A running Spark Connect server (``sc://host:port``) to run the jobs on instead of a
    # Spark started by this process: a warm Spark for repeated runs (README, "Warm Spark").
    remote: str | None = None


@dataclass(frozen=True, slots=True)
class ValidationSettings:
    """Run-wide settings."""

    lake_wait_timeout_s: float = 300.0  # how long to wait for the lake to reach position P
    recheck_lag_s: float = 5.0  # live targets: re-check mismatches after this lag
    replica_wait_timeout_s: float = 300.0  # a replcheck-fed target must reach a position
    max_reported_rows: int = 1000  # differing rows detailed per comparison
    # Who computes the digests (ENGINES): "auto" lets two databases compute their own when
    # both can (connectors.pushdown), a source database against a lake with DuckDB on the
    # lake ("local") where DuckDB hashes every column exactly, else with Spark on it
    # ("hybrid"), else Spark; "spark", "database", "hybrid" or "local" insist.
    engine: str = "auto"
    database_parallelism: int = 2  # database/hybrid/local: connections a database reads on
    # The secret sensitive key parts are hashed under (validator.key_masks); None: per run.
    mask_key: Secret | None = None
    # Hybrid and local engines, key-range leaves: keep the validated digests and re-hash
    # only what the changelog shows changed plus a sweep (validator.incremental; --incremental,
    # --full).
    incremental: IncrementalSettings = field(default_factory=IncrementalSettings)


AUDIT_STORES = ("lake", "file")


@dataclass(frozen=True, slots=True)
class ResyncSettings:
    """Safety limits of ``replcheck resync`` (``resync:`` section).

    Attributes:
        max_rows: Keys one re-sync may touch per comparison (more need ``--force``).
        max_result_age_h: Hours a result may be old (older needs ``--force``).
        batch_size: Keys per target transaction when repair SQL is applied.
        audit: Where the audit record goes: ``lake`` (a Delta table in the config's lake)
            or ``file`` (``resync-audit.jsonl`` in the output directory); None: the lake
            when the config has one, else the file.
    """

    max_rows: int = 10_000
    max_result_age_h: float = 24.0
    batch_size: int = 500
    audit: str | None = None

    def __post_init__(self) -> None:
        if self.max_rows < 1 or self.batch_size < 1 or self.max_result_age_h <= 0:
            raise ValueError("max_rows, batch_size and max_result_age_h must be positive")
        if self.audit is not None and self.audit not in AUDIT_STORES:
            raise ValueError(f"audit must be one of {AUDIT_STORES}")


@dataclass(frozen=True, slots=True)
class ValidatorConfig:
    """Everything ``replcheck validate`` needs."""

    connections: Mapping[str, ConnectionConfig]
    comparisons: tuple[ComparisonConfig, ...]
    spark: SparkConfig = field(default_factory=SparkConfig)
    validation: ValidationSettings = field(default_factory=ValidationSettings)
    resync: ResyncSettings = field(default_factory=ResyncSettings)

    def comparison(self, name: str) -> ComparisonConfig:
        """The comparison called ``name``."""
        for comparison in self.comparisons:
            if comparison.name == name:
                return comparison
        known = ", ".join(c.name for c in self.comparisons)
        raise ConfigError(f"no comparison named {name!r}; the config has: {known}")


def load_validator_config(
    path: Path | str,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ValidatorConfig:
    """Read a config file (a ``Path`` or a string), apply environment and command-line
    overrides, and check it all."""
    environ = os.environ if environ is None else environ
    root = load_root(path, overrides, environ, SECTIONS, ("connections", "comparisons"))
    connections = read_connections(root, environ)
    comparisons = tuple(_read_comparison(s, connections) for s in root.items("comparisons"))
    if not comparisons:
        raise root.error("comparisons", "lists no comparison")
    names = [c.name for c in comparisons]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise root.error("comparisons", f"duplicate comparison names: {duplicates}")
    return ValidatorConfig(
        connections=MappingProxyType(connections),
        comparisons=comparisons,
        spark=_read_spark(root.optional_child("spark")),
        validation=_read_settings(root.optional_child("validation"), environ),
        resync=_read_resync(root.optional_child("resync"), connections),
    )


def _read_table(
    section: Section, key: str, connections: Mapping[str, ConnectionConfig]
) -> TableRef:
    ref = section.child(key)
    ref.check_keys(["connection", "table"], required=["connection", "table"])
    connection = ref.require("connection", str)
    if connection not in connections:
        known = ", ".join(sorted(connections))
        raise ref.error("connection", f"unknown connection {connection!r}; known: {known}")
    table = ref.require("table", str)
    try:
        parse_table(table)
    except ConfigError as exc:
        raise ref.error("table", exc.message) from exc
    return TableRef(connection, table)


def _read_columns(section: Section | None) -> ColumnRules:
    if section is None:
        return ColumnRules()
    section.check_keys(["exclude", "map", "sensitive", "boolean"])
    rename = section.optional_child("map")
    mapping = {}
    if rename is not None:
        for source_name in rename.data:
            mapping[source_name] = rename.require(source_name, str)
    return ColumnRules(
        exclude=section.names("exclude"),
        rename=MappingProxyType(mapping),
        sensitive=section.names("sensitive"),
        boolean=section.names("boolean"),
    )


def _read_options(section: Section | None) -> tuple[ComparisonOptions, int | None, int]:
    if section is None:
        return ComparisonOptions(), None, DEFAULT_ROWS_PER_LEAF
    section.check_keys([*_OPTION_KEYS, "depth", "rows_per_leaf"])
    kinds: dict[str, type] = {"timestamp_precision": int, "float_digits": int}
    kinds["timestamp_rounding"] = str
    values = {k: section.get(k, kinds.get(k, bool)) for k in _OPTION_KEYS if k in section.data}
    try:
        options = ComparisonOptions(**values)  # type: ignore[arg-type]
    except (ContractError, ValueError) as exc:
        raise section.error(None, str(exc)) from exc
    depth = section.get("depth", int)
    if depth is not None and not 0 <= depth <= MAX_DEPTH:
        raise section.error("depth", f"must be 0..{MAX_DEPTH}")
    rows_per_leaf = section.get("rows_per_leaf", int, DEFAULT_ROWS_PER_LEAF)
    if rows_per_leaf is None or rows_per_leaf < 1:
        raise section.error("rows_per_leaf", "must be at least 1")
    return options, depth, rows_per_leaf


def _read_comparison(
    section: Section, connections: Mapping[str, ConnectionConfig]
) -> ComparisonConfig:
    section.check_keys(
        [
            "name",
            "source",
            "target",
            "key",
            "columns",
            "options",
            "expectations",
            "engine",
            "replication",
        ],
        required=["name", "source", "target"],
    )
    options, depth, rows_per_leaf = _read_options(section.optional_child("options"))
    columns = _read_columns(section.optional_child("columns"))
    key = section.names("key")
    excluded_keys = sorted(set(key) & set(columns.exclude))
    if excluded_keys:
        raise section.error("columns", f"key columns cannot be excluded: {excluded_keys}")
    return ComparisonConfig(
        name=section.require("name", str),
        source=_read_table(section, "source", connections),
        target=_read_table(section, "target", connections),
        key=key,
        columns=columns,
        options=options,
        depth=depth,
        rows_per_leaf=rows_per_leaf,
        expectations=tuple(_read_expectation(e) for e in section.items("expectations")),
        engine=_read_engine(section),
        replication=_read_replication(section),
    )


def _read_replication(section: Section) -> str:
    kind = section.get("replication", str, "unknown") or "unknown"
    if kind not in REPLICATION_KINDS:
        raise section.error("replication", f"must be one of {', '.join(REPLICATION_KINDS)}")
    return kind


def _read_expectation(entry: Section) -> ExpectationConfig:
    kind = entry.require("kind", str)
    if kind not in EXPECTATION_KINDS:
        known = ", ".join(EXPECTATION_KINDS)
        raise entry.error("kind", f"unknown expectation kind {kind!r}; expected one of: {known}")
    keys = EXPECTATION_KINDS[kind]
    required = [k for k in keys if k in ("column", "values", "pattern")]
    entry.check_keys(["kind", *keys], required=required)
    fields: dict[str, Any] = {"kind": kind, "where": entry.where(None)}
    if "column" in keys:
        fields["column"] = entry.require("column", str)
        mostly = entry.get("mostly", float, 1.0)
        if mostly is None or not 0 < mostly <= 1:
            raise entry.error("mostly", "must be above 0 and at most 1 (a share of the rows)")
        fields["mostly"] = mostly
    if kind in _EXPECTATION_READERS:
        fields.update(_EXPECTATION_READERS[kind](entry))
    return ExpectationConfig(**fields)


def _read_between(entry: Section) -> dict[str, Any]:
    low, high = _read_bound(entry, "min"), _read_bound(entry, "max")
    if low is None and high is None:
        raise entry.error(None, "a between expectation needs min, max or both")
    numbers = (int, float)
    if isinstance(low, numbers) and isinstance(high, numbers) and low > high:
        raise entry.error("min", f"is above max ({low} > {high})")
    return {"min_value": low, "max_value": high}


def _read_bound(entry: Section, key: str) -> Bound | None:
    value = entry.data.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, Bound)):
        problem = f"must be a number, a date or a timestamp, not {type(value).__name__}"
        raise entry.error(key, problem)
    return value


def _read_in_set(entry: Section) -> dict[str, Any]:
    values = entry.data.get("values")
    scalars = isinstance(values, list) and all(isinstance(v, SetValue) for v in values)
    if not values or not scalars:
        raise entry.error("values", "must be a non-empty list of texts, numbers or booleans")
    return {"values": tuple(values)}


def _read_regex(entry: Section) -> dict[str, Any]:
    pattern = entry.require("pattern", str)
    # Spark matches with Java regular expressions (RLIKE); Python's compiler rejects the
    # common mistakes (unbalanced brackets, bad escapes) before any Spark job starts.
    try:
        re.compile(pattern)
    except re.error as exc:
        raise entry.error("pattern", f"is not a valid regular expression: {exc}") from exc
    return {"pattern": pattern}


_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def _read_row_count(entry: Section) -> dict[str, Any]:
    value = entry.data.get("tolerance", 0)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return {"tolerance": float(value)}
    match = _PERCENT.match(value) if isinstance(value, str) else None
    if match is None:
        raise entry.error(
            "tolerance",
            "must be a whole number of rows (e.g. 10) or a percentage of the source's rows "
            "(e.g. 0.5%)",
        )
    return {"tolerance": float(match.group(1)), "tolerance_percent": True}


_EXPECTATION_READERS: Mapping[str, Callable[[Section], dict[str, Any]]] = MappingProxyType(
    {
        "between": _read_between,
        "in_set": _read_in_set,
        "regex": _read_regex,
        "row_count": _read_row_count,
    }
)


def _read_spark(section: Section | None) -> SparkConfig:
    if section is None:
        return SparkConfig()
    section.check_keys([f.name for f in fields(SparkConfig)])
    remote = section.get("remote", str, None)
    if remote is not None and not remote.startswith("sc://"):
        raise section.error(
            "remote", f"{remote!r} is not a Spark Connect URL: write sc://host:port"
        )
    conf_section = section.optional_child("conf")
    conf = {}
    if conf_section is not None:
        conf = {str(k): str(v) for k, v in conf_section.data.items()}
    jdbc = section.get("jdbc", bool, True)
    return SparkConfig(
        master=section.get("master", str, "local[2]") or "local[2]",
        conf=MappingProxyType(conf),
        jdbc=True if jdbc is None else jdbc,
        remote=remote or None,
    )


def _read_settings(section: Section | None, environ: Mapping[str, str]) -> ValidationSettings:
    if section is None:
        return ValidationSettings()
    section.check_keys(
        [
            "lake_wait_timeout_s",
            "recheck_lag_s",
            "replica_wait_timeout_s",
            "max_reported_rows",
            "engine",
            "database_parallelism",
            "mask_key",
            *INCREMENTAL_KEYS,
        ]
    )
    defaults = ValidationSettings()
    settings = ValidationSettings(
        lake_wait_timeout_s=section.get("lake_wait_timeout_s", float, defaults.lake_wait_timeout_s)
        or 0.0,
        recheck_lag_s=section.get("recheck_lag_s", float, defaults.recheck_lag_s) or 0.0,
        replica_wait_timeout_s=section.get(
            "replica_wait_timeout_s", float, defaults.replica_wait_timeout_s
        )
        or 0.0,
        max_reported_rows=section.get("max_reported_rows", int, defaults.max_reported_rows) or 0,
        engine=_read_engine(section) or defaults.engine,
        database_parallelism=section.get("database_parallelism", int, defaults.database_parallelism)
        or 0,
        mask_key=read_secret(section, "mask_key", environ),
        incremental=_read_incremental(section),
    )
    for key in (
        "lake_wait_timeout_s",
        "recheck_lag_s",
        "replica_wait_timeout_s",
        "max_reported_rows",
    ):
        if getattr(settings, key) < 0:
            raise section.error(key, "must not be negative")
    if settings.database_parallelism < 1:
        raise section.error("database_parallelism", "must be at least 1")
    return settings


INCREMENTAL_KEYS = ("incremental", "force_full", "sweep_share")


def _read_incremental(section: Section) -> IncrementalSettings:
    defaults = IncrementalSettings()
    share = section.get("sweep_share", float, defaults.sweep_share)
    if share is None or not 0 < share <= 1:
        raise section.error("sweep_share", "must be above 0 and at most 1")
    return IncrementalSettings(
        enabled=bool(section.get("incremental", bool, defaults.enabled)),
        force_full=bool(section.get("force_full", bool, defaults.force_full)),
        sweep_share=share,
    )


def _read_engine(section: Section) -> str | None:
    engine = section.get("engine", str)
    if engine is not None and engine not in ENGINES:
        raise section.error("engine", f"must be one of {', '.join(ENGINES)}, not {engine!r}")
    return engine


def _read_resync(
    section: Section | None, connections: Mapping[str, ConnectionConfig]
) -> ResyncSettings:
    if section is None:
        return ResyncSettings()
    section.check_keys(["max_rows", "max_result_age_h", "batch_size", "audit"])
    defaults = ResyncSettings()
    for key, kind in (("max_rows", int), ("max_result_age_h", float), ("batch_size", int)):
        value = section.get(key, kind)
        if value is not None and value <= 0:
            raise section.error(key, "must be above 0")
    audit = section.get("audit", str)
    if audit is not None and audit not in AUDIT_STORES:
        raise section.error("audit", f"must be one of: {', '.join(AUDIT_STORES)}")
    if audit == "lake" and not any(c.is_lake for c in connections.values()):
        raise section.error("audit", "is lake, but no connection is a lake; use audit: file")
    return ResyncSettings(
        max_rows=section.get("max_rows", int, defaults.max_rows) or defaults.max_rows,
        max_result_age_h=section.get("max_result_age_h", float, defaults.max_result_age_h)
        or defaults.max_result_age_h,
        batch_size=section.get("batch_size", int, defaults.batch_size) or defaults.batch_size,
        audit=audit,
    )
