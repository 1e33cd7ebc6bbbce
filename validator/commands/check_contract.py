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

from merkle.golden import Outcome, expected_outcomes, load_vectors, python_outcomes

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EngineCheck:
    """How one implementation did on the golden vectors."""

    engine: str
    vectors: int
    mismatched: tuple[str, ...]

    @property
    def passed(self) -> bool:
        """True when every vector was reproduced bit for bit."""
        return not self.mismatched


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


def check_contract(spark_session: Callable[[], Any] | None = None) -> list[EngineCheck]:
    """Replay the golden vectors through pure Python, DuckDB when it is installed and, if
    given a session factory, Spark."""
    vectors = load_vectors()
    expected = expected_outcomes(vectors)
    checks = [_compare("python", python_outcomes(vectors), expected)]
    if importlib.util.find_spec("duckdb") is not None:
        checks.append(_duckdb_check(vectors, expected))
    if spark_session is not None:
        from merkle.golden import spark_outcomes

        checks.append(_compare("spark", spark_outcomes(spark_session(), vectors), expected))
    return checks
