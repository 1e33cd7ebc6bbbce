"""One plan per comparison: everything an engine needs, built once, in one place.

``plan_comparison`` reflects both sides, reconciles their columns, chooses the engine
(``validation.engine``: the two databases when both can compute their own digests; when
the target is a lake and the source can, the source database with DuckDB on the lake
(``local``) where DuckDB hashes every compared column exactly, else with Spark on the lake
(``hybrid``); else Spark) and gathers the settings the run needs; an engine then gets the
plan and nothing else (never the whole config). Every engine answers to ``Engine``.
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
from validator.engines.database.plan import DatabaseSide, plan_side
from validator.reflection import Reflected, reflect_comparison
from validator.result import ComparisonResult
from validator.settings import CompareSettings

if TYPE_CHECKING:
    from validator.engines.spark.compare import Side

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ComparisonPlan:
    """One comparison, ready for an engine.

    Attributes:
        reflected: Both sides as reflected, the reconciled layout and the key.
        settings: Tree and report sizes, sensitive columns, how long to wait for a lake.
        databases: Both sides planned for the database engine; None: it does not compare.
        lake_source: The source planned for the hybrid or the local engine (its digests in
            its database, the lake's in Spark or DuckDB); None: neither compares.
        parallelism: Connections a database side reads on at once (database, hybrid).
        recheck_lag_s: Live targets: how long to wait before re-checking differences.
        local: The lake side is read and hashed by DuckDB on this machine (the local
            engine), not by Spark (the hybrid engine).
    """

    reflected: Reflected
    settings: CompareSettings
    databases: tuple[DatabaseSide, DatabaseSide] | None
    lake_source: DatabaseSide | None
    parallelism: int
    recheck_lag_s: float
    local: bool = False

    def __post_init__(self) -> None:
        if self.databases is not None and self.lake_source is not None:
            raise ValueError("a comparison is planned for one engine")
        if self.local and self.lake_source is None:
            raise ValueError("the local engine compares a source database with a lake")

    @property
    def comparison(self) -> ComparisonConfig:
        """The comparison's configuration."""
        return self.reflected.comparison


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
    engine = comparison.engine or validation.engine
    databases, lake_source = _pushed_sides(reflected, engine)
    local = lake_source is not None and _runs_locally(reflected, engine)
    return ComparisonPlan(
        reflected,
        settings,
        databases,
        lake_source,
        validation.database_parallelism,
        validation.recheck_lag_s,
        local,
    )


Pushed = tuple[tuple[DatabaseSide, DatabaseSide] | None, DatabaseSide | None]
"""Both sides for the database engine, or the source for the hybrid or the local engine
(or neither)."""


def _pushed_sides(reflected: Reflected, engine: str) -> Pushed:
    """The sides that compute their own digests, for the database, the hybrid or the local
    engine; neither when Spark compares."""
    if engine == "spark":
        return None, None
    comparison = reflected.comparison
    try:
        return _plan_pushed(reflected, engine)
    except NotPushable as exc:
        if engine in INSISTING_ENGINES:
            raise ConfigError(
                f"comparison {comparison.name}: the {engine} engine cannot compare it ({exc});"
                " set engine: auto or spark"
            ) from exc
        log.info("comparison %s: compared in Spark: %s", comparison.name, exc)
        return None, None


def _runs_locally(reflected: Reflected, engine: str) -> bool:
    """Whether the local engine hashes the lake (``engine``: auto or local), rather than
    Spark (hybrid); ``engine: local`` where it cannot is a ConfigError."""
    if engine not in ("auto", "local"):
        return False
    comparison = reflected.comparison
    try:
        check_local(reflected)
    except NotPushable as exc:
        if engine == "local":
            raise ConfigError(
                f"comparison {comparison.name}: the local engine cannot compare it ({exc});"
                " set engine: auto or hybrid"
            ) from exc
        log.info("comparison %s: the lake is hashed in Spark (hybrid): %s", comparison.name, exc)
        return False
    log.info("comparison %s: the lake is hashed in DuckDB (local engine)", comparison.name)
    return True


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
