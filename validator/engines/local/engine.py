"""The local engine: a source database computes its own leaf digests, DuckDB the lake's.

The flow is the hybrid engine's (``validator.engines.lake_flow``); only the lake side
differs: the lake's files are read on this machine with ``pyarrow`` and hashed by DuckDB
SQL into the source's leaves (``lake.py`` here), bit for bit as Spark would hash them, so
no JVM starts. The planner (``validator.plan``) chooses it where DuckDB computes every
compared column exactly (``merkle.duckdb``); elsewhere the hybrid engine runs. A source
that computes no digests, set to ``engine: local``, is read here and hashed by DuckDB too
(``source.py`` here).
"""

from __future__ import annotations

import tempfile
from contextlib import closing
from pathlib import Path

from validator.engines.lake_flow import compare_with_lake
from validator.engines.local.lake import DuckDBLake, connect
from validator.engines.local.source import compare_read_here
from validator.plan import ComparisonPlan, EngineRun


class LocalEngine:
    """The local engine as an ``Engine`` of ``validator.plan``: one DuckDB connection per
    comparison (one per side when the source is read here), closed after it, with its own
    spill directory removed after it."""

    def __call__(self, plan: ComparisonPlan) -> EngineRun:
        with tempfile.TemporaryDirectory(prefix="replcheck-duckdb-") as spill:
            if plan.lake_source is None:  # the source computes no digests: read it here
                return EngineRun(compare_read_here(plan, Path(spill)), None)
            with closing(connect(spill)) as connection:
                lake = DuckDBLake(connection)
                return EngineRun(*compare_with_lake(plan, plan.lake_source, lake))
