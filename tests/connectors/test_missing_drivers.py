"""A missing optional driver is a one-line error naming the ``pip install`` that adds it.

Each driver is made unimportable (``sys.modules[name] = None`` makes ``import name`` raise)
and the place that first needs it is called: the message must name the right extra.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.drivers import DRIVER_EXTRAS, driver_import
from cdc_core.errors import TerminalError
from connectors.mariadb.binlog.stream import BinlogStream, StreamSettings
from connectors.registry import capture_dialect_for, connector_for
from validator import cli

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _block(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make ``module`` and every submodule of it unimportable for this test."""
    names = [name for name in sys.modules if name.startswith(module + ".")]
    for name in [module, *names]:
        monkeypatch.setitem(sys.modules, name, None)


def _binlog_stream() -> None:
    settings = StreamSettings("127.0.0.1", 1, "u", None, "db", 1, 1.0, "mysql://u@127.0.0.1:1")
    next(BinlogStream(settings, []).events("binlog.000001", 4, lambda: "binlog.000001:4"))


def _hana_capture() -> None:
    capture_dialect_for("hana://u@h:30015/", "pw", ["T"]).check_installed(["T"])


def _great_expectations() -> None:
    from validator.expectations import _import_gx

    _import_gx()


def _spark() -> None:
    from validator.engines.sides.spark.session import build_spark_session

    build_spark_session()


# (driver module, the call that first needs it, the extra that installs it)
CASES: list[tuple[str, Callable[[Path], object], str]] = [
    ("pymysql", lambda _: connector_for("mysql+pymysql://u@127.0.0.1:1/db").connect(), "mariadb"),
    ("pymysqlreplication", lambda _: _binlog_stream(), "mariadb"),
    ("psycopg", lambda _: connector_for("postgresql://u@127.0.0.1:1/db").reflect("t"), "postgres"),
    ("oracledb", lambda _: connector_for("oracle://u@h/?service_name=S").reflect("t"), "oracle"),
    ("hdbcli", lambda _: connector_for("hana://u@h:30015/", "pw").reflect("T"), "hana"),
    ("hdbcli", lambda _: _hana_capture(), "hana"),
    ("duckdb", lambda tmp: connector_for(f"duckdb:///{tmp}/x.duckdb").reflect("t"), "embedded"),
    ("great_expectations", lambda _: _great_expectations(), "quality"),
    ("pyspark", lambda _: _spark(), "spark"),
]


@pytest.mark.parametrize(("module", "call", "extra"), CASES, ids=[case[0] for case in CASES])
def test_missing_driver_names_its_extra(
    module: str,
    call: Callable[[Path], object],
    extra: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _block(monkeypatch, module)
    with pytest.raises(TerminalError) as caught:
        call(tmp_path)
    message = str(caught.value)
    assert f"pip install 'replcheck[{extra}]'" in message
    assert module in message and "\n" not in message


def test_every_driver_extra_is_declared() -> None:
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    assert set(DRIVER_EXTRAS.values()) <= set(declared)


def test_other_import_errors_pass_through(monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, "not_a_driver_of_ours")
    with pytest.raises(ImportError), driver_import("a test"):
        import not_a_driver_of_ours  # type: ignore[import-not-found]  # noqa: F401


def test_cli_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "replcheck.yaml"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "duckdb:///{tmp_path}/source.duckdb"}}\n'
        f'  tgt: {{url: "sqlite:///{tmp_path}/target.db"}}\n'
        "comparisons:\n"
        "  - name: orders\n"
        "    source: {connection: src, table: orders}\n"
        "    target: {connection: tgt, table: orders}\n"
        "validation: {engine: database}\n",
        encoding="utf-8",
    )
    _block(monkeypatch, "duckdb")
    code = cli.run(["validate", "-c", str(config), "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().err.splitlines()
    assert code == 2
    hints = [line for line in printed if "pip install" in line]
    assert len(hints) == 1, printed
    assert "could not be validated: the DuckDB connector needs duckdb" in hints[0]
    assert hints[0].endswith("pip install 'replcheck[embedded]'")
