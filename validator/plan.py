"""One plan per comparison: everything an engine needs, built once, in one place.

``plan_comparison`` reflects both sides, reconciles their columns, chooses the engine
(``validation.engine``: the two databases when both can compute their own digests; when
the target is a lake and the source can, the source database with DuckDB on the lake
(``local``) where DuckDB hashes every compared column exactly, else with Spark on the lake
(``hybrid``); else Spark) and gathers the settings the run needs; an engine then gets the
plan and nothing else (never the whole config). Every engine answers to ``Engine``. The plan
names its engine and why it was chosen (``engine``, ``engine_reason``), logged once here and
kept in the result.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from cdc_core.errors import ConfigError
from connectors.pushdown import NotPushable
from merkle.duckdb import NotInDuckDB, check_layout
from validator.config import INSISTING_ENGINES, LAKE_ENGINES, ComparisonConfig, ValidatorConfig
from validator.engines.sides.database.plan import DatabaseSide, plan_side
from validator.reflection import Reflected, reflect_comparison
from validator.result import ComparisonResult
from validator.settings import CompareSettings

if TYPE_CHECKING:
    from validator.engines.sides.spark.side import Side

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ComparisonPlan:
    """One comparison, ready for an engine.

    Attributes:
        reflected: Both sides as reflected, the reconciled layout and the key.
        settings: Tree and report sizes, sensitive columns, how long to wait for a lake.
        databases: Both sides planned for the database engine; None: it does not compare.
        lake_source: The source planned for the hybrid or the local engine (its digests in
            its database, the lake's in Spark or DuckDB); None: neither compares, or the
            local engine reads a source that computes no digests on this machine.
        parallelism: Connections a database side reads on at once (database, hybrid).
        recheck_lag_s: Live targets: how long to wait before re-checking differences.
        engine: The engine that compares: ``database``, ``local`` (the lake read and hashed
            by DuckDB on this machine), ``hybrid`` (by Spark) or ``spark``.
        engine_reason: Why that engine, in words (the configured engine, or what ``auto``
            found).
    """

    reflected: Reflected
    settings: CompareSettings
    databases: tuple[DatabaseSide, DatabaseSide] | None
    lake_source: DatabaseSide | None
    parallelism: int
    recheck_lag_s: float
    engine: str
    engine_reason: str

    def __post_init__(self) -> None:
        sides = (self.databases is not None, self.lake_source is not None)
        if sides not in _ENGINE_SIDES.get(self.engine, ()):
            raise ValueError(f"the {self.engine} engine is not planned with these sides")

    @property
    def comparison(self) -> ComparisonConfig:
        """The comparison's configuration."""
        return self.reflected.comparison

    @property
    def local(self) -> bool:
        """The lake side is read and hashed by DuckDB on this machine (the local engine)."""
        return self.engine == "local"

    @property
    def incremental(self) -> bool:
        """The mode, decided here only: the run keeps validation state and re-hashes only
        what changed (``validator.incremental``), as it was asked to and its engine can (a
        lake engine with the source planned to compute its own digests)."""
        can = self.engine in LAKE_ENGINES and self.lake_source is not None
        return self.settings.incremental.keeps_state and can

    @property
    def not_incremental(self) -> str | None:
        """Why a run asked to keep validation state (``--incremental``, ``--full``) cannot
        (None: it was not asked, or its engine keeps state)."""
        if not self.settings.incremental.keeps_state or self.incremental:
            return None
        return (
            "incremental runs need a lake target and the local or hybrid engine;"
            f" engine {self.engine} was chosen because {self.engine_reason}"
        )


# Which sides each engine is planned with: (both databases, the source for a lake engine).
# The local engine without a planned source reads the source's rows on this machine.
_ENGINE_SIDES = {
    "database": {(True, False)},
    "local": {(False, True), (False, False)},
    "hybrid": {(False, True)},
    "spark": {(False, False)},
}


class EngineRun(NamedTuple):
    """What an engine hands back: the result, and the target as it read it (Spark only)."""

    result: ComparisonResult
    target: Side | None


class Engine(Protocol):
    """Compares the two sides of a plan."""

    def __call__(self, plan: ComparisonPlan) -> EngineRun: ...


def plan_comparison(config: ValidatorConfig, comparison: ComparisonConfig) -> ComparisonPlan:
    """Reflect, reconcile and choose the engine of one comparison."""
    reflected = reflect_comparison(config, comparison)
    validation = config.validation
    settings = CompareSettings(
        depth=comparison.depth,
        rows_per_leaf=comparison.rows_per_leaf,
        max_reported_rows=validation.max_reported_rows,
        sensitive=frozenset(comparison.columns.sensitive),
        lake_wait_timeout_s=validation.lake_wait_timeout_s,
        incremental=validation.incremental,
    )
    choice = _choose_engine(reflected, comparison.engine or validation.engine)
    log.info("comparison %s: %s engine: %s", comparison.name, choice.engine, choice.reason)
    return ComparisonPlan(
        reflected,
        settings,
        choice.databases,
        choice.lake_source,
        validation.database_parallelism,
        validation.recheck_lag_s,
        choice.engine,
        choice.reason,
    )


class EngineChoice(NamedTuple):
    """The engine of one comparison, why, and the sides it computes digests of."""

    engine: str
    reason: str
    databases: tuple[DatabaseSide, DatabaseSide] | None = None
    lake_source: DatabaseSide | None = None


def _choose_engine(reflected: Reflected, configured: str) -> EngineChoice:
    """The engine ``configured`` (``engine``: auto, or one to insist on) comes to; an
    engine insisted on where it cannot compare is a ConfigError."""
    if configured == "spark":
        return EngineChoice("spark", _configured(reflected, configured))
    try:
        databases, source = _plan_pushed(reflected, configured)
    except NotPushable as exc:
        # Only a source that computes no digests at all is read here: one whose database
        # cannot hash a column keeps the error naming it (its rows stay in its server).
        reads_here = reflected.target is None and reflected.source.digest_dialect() is None
        if configured == "local" and reads_here:
            return _read_here(reflected, configured, exc)
        _refuse(reflected, configured, exc, "spark")
        where = "the source database" if reflected.target is None else "the databases"
        return EngineChoice("spark", f"auto: {where} cannot compute the digests ({exc})")
    if databases is not None:
        why = "auto: both databases compute their own digests"
        return EngineChoice("database", _configured(reflected, configured, why), databases)
    assert source is not None  # a lake target
    return _lake_engine(reflected, configured, source)


def _lake_engine(reflected: Reflected, configured: str, source: DatabaseSide) -> EngineChoice:
    """``local`` where DuckDB hashes the lake exactly (``configured``: auto or local), else
    ``hybrid``."""
    if configured == "hybrid":
        return EngineChoice("hybrid", _configured(reflected, configured), None, source)
    try:
        check_local(reflected)
    except NotPushable as exc:
        _refuse(reflected, configured, exc, "hybrid")
        why = f"auto: the source database computes its digests, Spark hashes the lake ({exc})"
        return EngineChoice("hybrid", why, None, source)
    why = (
        "auto: the source database computes its digests, DuckDB hashes every compared"
        " column of the lake exactly"
    )
    return EngineChoice("local", _configured(reflected, configured, why), None, source)


def _read_here(reflected: Reflected, configured: str, exc: NotPushable) -> EngineChoice:
    """``local`` insisted on for a source that computes no digests (``exc`` says why): its
    rows are read on this machine and DuckDB hashes them as it hashes the lake."""
    try:
        check_local(reflected)
        check_source_local(reflected)
    except NotPushable as refused:
        _refuse(reflected, configured, refused, "spark")  # local is insisted on: it raises
        raise
    why = f"{_configured(reflected, configured)}; {exc}: its rows are read and hashed in DuckDB"
    return EngineChoice("local", why)


def _configured(reflected: Reflected, configured: str, auto: str = "") -> str:
    """Why ``configured`` was used: ``auto``'s reason, or where the engine was set."""
    if configured == "auto":
        return auto
    comparison = reflected.comparison
    if comparison.engine:
        return f"comparison {comparison.name} sets engine: {configured}"
    return f"validation.engine is {configured}"


def _refuse(reflected: Reflected, configured: str, exc: NotPushable, instead: str) -> None:
    """A ConfigError when the engine insisted on (not auto) cannot compare, naming why and
    the engine to set instead."""
    if configured in INSISTING_ENGINES:
        raise ConfigError(
            f"comparison {reflected.comparison.name}: the {configured} engine cannot compare"
            f" it ({exc}); set engine: auto or {instead}"
        ) from exc


def check_local(reflected: Reflected) -> None:
    """Raise NotPushable unless DuckDB can read and hash the lake side exactly: DuckDB is
    installed, no expectations (Great Expectations checks a Spark frame) and every compared
    column's lake type has exact DuckDB SQL (``merkle.duckdb``)."""
    if reflected.comparison.expectations:
        raise NotPushable("its expectations run on the lake as a Spark frame")
    if importlib.util.find_spec("duckdb") is None:
        raise NotPushable("duckdb is not installed (pip install 'replcheck[embedded]')")
    schema = reflected.lake_schema
    assert schema is not None  # a lake target
    layout, names = reflected.reconciled.layout, reflected.reconciled.target_names
    types = {name: schema.field(names[name]).type for name in layout.names}
    try:
        check_layout(layout, types)
    except NotInDuckDB as exc:
        raise NotPushable(str(exc)) from exc


def check_source_local(reflected: Reflected) -> None:
    """Raise NotPushable unless DuckDB hashes every compared column of the source's rows, as
    its connector reads them (Arrow), exactly."""
    layout = reflected.reconciled.layout
    schema = reflected.source.arrow_schema(reflected.source_schema, layout.names)
    try:
        check_layout(layout, {name: schema.field(name).type for name in layout.names})
    except NotInDuckDB as exc:
        raise NotPushable(f"the source: {exc}") from exc


Pushed = tuple[tuple[DatabaseSide, DatabaseSide] | None, DatabaseSide | None]
"""Both sides for the database engine, or the source for the hybrid or the local engine."""


def _plan_pushed(reflected: Reflected, engine: str) -> Pushed:
    """The pushed sides (``engine``: auto, database, hybrid or local), or NotPushable."""
    if reflected.target is None and engine == "database":
        raise NotPushable("the target is a lake (engine: local or hybrid)")
    if reflected.target is not None and engine in LAKE_ENGINES:
        raise NotPushable("the target is a database, not a lake (engine: database)")
    layout = reflected.reconciled.layout
    same = {n: n for n in layout.names}
    source = plan_side(
        reflected.source, reflected.source_schema, layout, same, reflected.source_label
    )
    if reflected.target is None:
        return None, source
    names = reflected.reconciled.target_names
    target = plan_side(*reflected.target, layout, names, reflected.target_label)
    return (source, target), None
