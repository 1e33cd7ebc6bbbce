"""The hybrid engine: a source database computes its own leaf digests, Spark the lake's.

The flow is ``validator.engines.lake_flow`` (shared with the local engine);
Spark reads the lake as of the source's positions and hashes it with the MD5 flavour of the
hash contract into the source's leaves (``lake.py`` here). The hashed lake is persisted
unless it is a plain read of the lake's mirror, cheaper to read again than to cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from validator.engines.hybrid.lake import SparkLake
from validator.engines.lake_flow import compare_with_lake
from validator.plan import ComparisonPlan, EngineRun

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class HybridEngine:
    """The hybrid engine as an ``Engine`` of ``validator.plan``, on one Spark session."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def __call__(self, plan: ComparisonPlan) -> EngineRun:
        assert plan.lake_source is not None  # planned for this engine
        return EngineRun(*compare_with_lake(plan, plan.lake_source, SparkLake(self.spark)))
