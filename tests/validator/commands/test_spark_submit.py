"""The nightly entry point: the packaged bundle runs under spark-submit --master local[2]."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from validator.commands.package import build_bundle

pytestmark = pytest.mark.spark


def test_the_bundle_holds_every_package_and_its_data(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path)
    names = zipfile.ZipFile(bundle.archive).namelist()
    for expected in (
        "merkle/canonical.py",
        "merkle/golden_vectors.jsonl",
        "reports/result.schema.json",
        "reports/templates/report.html.j2",
        "validator/cli.py",
        "connectors/duckdb/connector.py",
    ):
        assert expected in names
    assert not any("__pycache__" in name for name in names)


def test_demo_runs_under_spark_submit(tmp_path: Path) -> None:
    bundle = build_bundle(tmp_path / "dist")
    spark_submit = Path(sys.executable).with_name("spark-submit")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    # Run from an empty directory so the archive, not the checkout, provides replcheck.
    result = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[2]",
            "--conf",
            "spark.ui.enabled=false",
            "--py-files",
            str(bundle.archive),
            str(bundle.launcher),
            "demo",
            "--source",
            "duckdb",
            "--workdir",
            str(tmp_path / "work"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "demo: exactly the 13 injected differences were found" in result.stdout
    # --py-files entries come first on the path: the driver imported replcheck from the zip
    # (spark-submit merges the Python driver's stderr into its own stdout).
    assert f"replcheck imported from {bundle.archive}" in result.stdout
