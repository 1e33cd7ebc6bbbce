"""The generative differential tester with its lake in an S3 bucket (moto on loopback): a
random workload on the real MariaDB server, ``cdc run`` SIGKILLed and restarted on the way,
judged by the product's validator (its default engine, as on local disk: DuckDB or Spark
reading the bucket) and by an independent read of the bucket's mirror. More seeds:
``bench/soak_differential.py --source mariadb-full --store s3``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.generative.sql.runner import Run, check_seed
from tests.object_store.s3_server import S3Lake
from tests.private_servers import MariaDBServer

pytestmark = [
    pytest.mark.object_store,
    pytest.mark.integration,
    pytest.mark.mariadb,
    pytest.mark.spark,
]

SEED = 9  # the local-disk test's seed of mariadb-full: SIGKILLs, copies of equal rows


def test_a_random_workload_replicates_exactly_into_s3(
    spark: Any, tmp_path: Path, s3_lake: S3Lake, mariadb_full: MariaDBServer
) -> None:
    run = Run(mariadb_full, spark, tmp_path, store=s3_lake.url)
    failure = check_seed(SEED, "mariadb-full", run, minimize=False)
    assert failure is None, failure.report()
    assert run.totals["kills"] >= 1
    assert any(k.startswith(f"gen_{SEED}_") for k in s3_lake.object_keys())  # the bucket
    assert not any(tmp_path.rglob("_delta_log"))
