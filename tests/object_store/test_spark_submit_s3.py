"""The nightly ``spark-submit`` on a Spark standalone cluster validates an S3 lake.

A master and a worker run on loopback (``tests.spark_standalone``); the cluster has no
Delta or ``hadoop-aws`` jars (pyspark's own jars only, nothing passed with ``--jars`` or
``--packages``). The driver resolves the Delta snapshot with deltalake and the executors,
started by the worker without any AWS variable, read the files through pyarrow with the
lake's settings shipped in their tasks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runs import catch_up
from tests.object_store.s3_server import S3Lake
from tests.object_store.test_cdc_and_validate import _run, _s3_config
from tests.private_servers import MariaDBServer
from tests.spark_standalone import running_standalone_cluster
from validator.commands.package import build_bundle

pytestmark = [
    pytest.mark.object_store,
    pytest.mark.integration,
    pytest.mark.mariadb,
    pytest.mark.spark,
]


def test_spark_submit_on_a_standalone_cluster_validates_an_s3_lake(
    tmp_path: Path,
    s3_lake: S3Lake,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    jars = Path(sys.executable).parents[1].glob("lib/python*/site-packages/pyspark/jars/*.jar")
    assert not [j.name for j in jars if "hadoop-aws" in j.name or "delta" in j.name]
    database = mariadb_database(mariadb_full)
    table = f"{database}.items"
    rows = ", ".join(f"({i}, 'n{i}', {i}.5)" for i in range(1, 501))
    _run(
        mariadb_full,
        database,
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(10,2))",
        f"INSERT INTO items VALUES {rows}",
    )
    config = _s3_config(tmp_path, mariadb_full.url(database), table, s3_lake.url)
    catch_up(config)
    _run(mariadb_full, database, "UPDATE items SET name = 'moved' WHERE id > 400")
    catch_up(config)  # a changelog file after the mirror's first version
    _run(mariadb_full, database, "SET SESSION sql_log_bin = 0", "DELETE FROM items WHERE id = 7")
    spark_config = config.with_name("spark.yaml")
    spark_config.write_text(
        config.read_text(encoding="utf-8").replace("engine: local", "engine: spark"), "utf-8"
    )
    bundle = build_bundle(tmp_path / "dist")
    worker_environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with running_standalone_cluster(tmp_path / "cluster", worker_environ) as master:
        submit = Path(sys.executable).with_name("spark-submit")
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
        out = tmp_path / "out"
        done = subprocess.run(
            [
                *(str(submit), "--master", master, "--conf", "spark.ui.enabled=false"),
                *("--conf", f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}"),
                *("--py-files", str(bundle.archive), str(bundle.launcher)),
                *("validate", "--config", str(spark_config), "--out", str(out)),
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (comparison,) = json.loads((out / "result.json").read_text())["comparisons"]
    assert comparison["engine"] == "spark", comparison
    assert comparison["source_rows"] == 499 and comparison["target_rows"] == 500
    assert [(d["kind"], d["key"]) for d in comparison["differences"]] == [
        ("extra_in_target", ["7"])
    ]
