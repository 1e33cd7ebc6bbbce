"""Prove that this installation's engines reproduce the hash contract's golden vectors.

Run on a new cluster before trusting its digests: a mismatch means an engine (a Spark or
Java version, a Python build) hashes some value differently, and validations there would
report false drift.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdc_core.drivers import install_hint
from merkle.golden import Outcome, expected_outcomes, load_vectors, python_outcomes

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EngineCheck:
    """How one implementation did on the golden vectors; ``skipped`` says why it was not
    checked at all (its package is not installed), None when it was."""

    engine: str
    vectors: int
    mismatched: tuple[str, ...]
    skipped: str | None = None

    @property
    def passed(self) -> bool:
        """True when every vector was reproduced bit for bit, or the engine was skipped:
        what is not installed cannot hash anything differently."""
        return not self.mismatched


def _skipped(engine: str, module: str) -> EngineCheck:
    why = f"{module} is not installed ({install_hint(module)})"
    log.info("%s: skipped: %s", engine, why)
    return EngineCheck(engine, 0, (), skipped=why)


def _compare(
    engine: str, produced: dict[str, Outcome], expected: dict[str, Outcome]
) -> EngineCheck:
    mismatched = tuple(sorted(i for i, want in expected.items() if produced.get(i) != want))
    log.info("%s: %d vectors, %d mismatched", engine, len(expected), len(mismatched))
    return EngineCheck(engine, len(expected), mismatched)


def _duckdb_check(vectors: list[dict[str, Any]], expected: dict[str, Outcome]) -> EngineCheck:
    """The vectors DuckDB computes (the local engine's MD5 flavour, ``merkle.duckdb``); the
    others (``float_digits``, ``case_insensitive``) it refuses, and the planner sends such
    columns to Spark. JSON it computes with its own implementation (``merkle.duckdb_json``)."""
    import duckdb

    from merkle.golden import duckdb_outcomes

    with duckdb.connect() as connection:
        produced = duckdb_outcomes(connection, vectors)
    computed = {i: o for i, o in produced.items() if not isinstance(o, str)}
    return _compare("duckdb", computed, {i: expected[i] for i in computed})


def check_contract(
    spark_session: Callable[[], Any] | None = None, *, spark_required: bool = False
) -> list[EngineCheck]:
    """Replay the golden vectors through pure Python, DuckDB and, given a session factory,
    Spark; an engine whose package is not installed is skipped, and its check says so.

    Args:
        spark_session: Starts the Spark session to check (None: Spark is not checked).
        spark_required: Start it even without pyspark, so that its missing-driver error
            (naming the ``pip install``) ends the check rather than a skip.
    """
    vectors = load_vectors()
    expected = expected_outcomes(vectors)
    checks = [_compare("python", python_outcomes(vectors), expected)]
    if _installed("duckdb"):
        checks.append(_duckdb_check(vectors, expected))
    else:
        checks.append(_skipped("duckdb", "duckdb"))
    if spark_session is not None and not (spark_required or _installed("pyspark")):
        checks.append(_skipped("spark", "pyspark"))
    elif spark_session is not None:
        from merkle.golden import spark_outcomes

        checks.append(_compare("spark", spark_outcomes(spark_session(), vectors), expected))
    return checks


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None
