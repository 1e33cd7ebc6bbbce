"""Optional drivers and the extra that installs each: the one list of them.

Vendor drivers and heavy engines are optional extras (``pyproject.toml``,
``[project.optional-dependencies]``), imported lazily where first needed. Each such import
sits inside :func:`driver_import`, so a missing driver is a `TerminalError` naming the
``pip install`` to run, not a bare ``ModuleNotFoundError``. It lives in ``cdc_core`` so that
``merkle`` (pyspark) and ``validator`` (Great Expectations) use the same list.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from cdc_core.errors import TerminalError

#: Top-level module of each optional driver -> the replcheck extra that installs it.
DRIVER_EXTRAS: Mapping[str, str] = MappingProxyType(
    {
        "pymysql": "mariadb",
        "pymysqlreplication": "mariadb",
        "zstandard": "mariadb",  # MySQL's compressed transactions
        "psycopg": "postgres",
        "psycopg2": "postgres",
        "oracledb": "oracle",
        "hdbcli": "hana",
        "duckdb": "embedded",
        "pyspark": "spark",
        "great_expectations": "quality",
    }
)


def install_hint(module: str) -> str:
    """The command that installs ``module`` (a dotted name is looked up by its top level).

    Raises:
        KeyError: ``module`` is not an optional driver.
    """
    return f"pip install 'replcheck[{DRIVER_EXTRAS[module.partition('.')[0]]}]'"


def missing_driver(module: str, needed_by: str) -> TerminalError:
    """The error for an optional driver that is not installed."""
    return TerminalError(
        f"{needed_by} needs {module}, which is not installed: {install_hint(module)}"
    )


@contextlib.contextmanager
def driver_import(needed_by: str) -> Iterator[None]:
    """Import optional drivers inside this block; a missing one names its extra.

    The ``import`` statements stay in the caller so type checkers still see the driver.

    Args:
        needed_by: Who needs the driver, for the message (``"the Oracle connector"``).

    Raises:
        TerminalError: An optional driver (one of `DRIVER_EXTRAS`) cannot be imported.
    """
    try:
        yield
    except ImportError as exc:
        module = (exc.name or "").partition(".")[0]
        if module not in DRIVER_EXTRAS:
            raise  # not a driver of ours: a broken installation, shown as it is
        raise missing_driver(module, needed_by) from exc
