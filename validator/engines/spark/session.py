"""Build the one Spark session a validation run (or a test run) uses.

A cold session plus its first job costs many seconds (DESIGN.md, platform notes), so callers
build one session per process and pass it around, never one per table.

The terminal is replcheck's: the JVM this module starts logs through ``log4j2.properties``
beside it (ERROR and above; WARN and above when verbose), and, unless verbose, its standard
error, where the JVM's own start-up warnings go past log4j, is discarded.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_core.drivers import driver_import
from cdc_core.errors import TerminalError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

_DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    # Sized for small machines (2 cores): the default of 200 shuffle partitions only adds
    # scheduling overhead to the GROUP BYs that build leaf digests.
    "spark.sql.shuffle.partitions": "4",
    # The hash contract encodes timestamps as UTC epoch micros; a session in any other zone
    # would shift TIMESTAMP values read from sources before they are hashed.
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "2g",
    # Column names are compared exactly, as PostgreSQL and quoted Oracle names are: a table
    # may hold both "Amount" and "amount", which Spark's default resolution calls ambiguous.
    "spark.sql.caseSensitive": "true",
    # Progress bars interleave with the CLI's own output; JSON log lines are unreadable.
    "spark.ui.showConsoleProgress": "false",
    "spark.log.structuredLogging.enabled": "false",
    # spark.sql.ansi.enabled keeps Spark 4's default (true): merkle makes its wrapping sums
    # explicit instead of relying on silent overflow.
}


LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def jvm_log_level(verbose: bool) -> str:
    """The JVM's log4j level: Spark's usual WARN when verbose, else only errors."""
    return "WARN" if verbose else "ERROR"


def under_spark_submit() -> bool:
    """True when this Python driver was started by ``spark-submit`` (which then owns the
    master and the cluster settings): the JVM hands its gateway to the process it starts."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def jdbc_jars() -> list[str]:
    """JDBC driver jars to put on Spark's classpath: the system's jar of every product that
    reads over JDBC (``connectors.registry.jdbc_drivers``) where installed, and those listed
    in ``REPLCHECK_JDBC_JARS`` (comma-separated: drivers installed elsewhere; a JDBC read is
    used where the connector describes one and its driver's jar file name is among these)."""
    from connectors.registry import jdbc_drivers

    found = [str(jar) for driver in jdbc_drivers() if (jar := driver.system_jar())]
    listed = os.environ.get("REPLCHECK_JDBC_JARS", "")
    return found + [jar.strip() for jar in listed.split(",") if jar.strip()]


def _with_jars(conf: Mapping[str, str], jars: list[str]) -> dict[str, str]:
    """``conf`` with ``jars`` added to ``spark.jars`` (after any the caller set)."""
    merged = dict(conf)
    present = [jar for jar in merged.get("spark.jars", "").split(",") if jar]
    merged["spark.jars"] = ",".join(present + [jar for jar in jars if jar not in present])
    return merged


def _with_log_config(conf: Mapping[str, str], verbose: bool) -> dict[str, str]:
    """``conf`` with the driver JVM pointed at ``LOG4J_CONFIG``; the caller's own Java options
    come after replcheck's, so a ``-Dlog4j2.configurationFile`` of theirs wins."""
    merged = dict(conf)
    ours = (
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"
        f" -Dreplcheck.jvm.log.level={jvm_log_level(verbose)}"
    )
    merged[JAVA_OPTIONS] = f"{ours} {merged.get(JAVA_OPTIONS, '')}".strip()
    return merged


def build_spark_session(
    app_name: str = "replcheck",
    master: str = "local[2]",
    extra_conf: Mapping[str, str] | None = None,
    jdbc: bool = True,
    verbose: bool = False,
) -> SparkSession:
    """Return a Spark session configured for replcheck's jobs.

    Args:
        app_name: Name shown in Spark's logs.
        master: Spark master URL, e.g. ``local[2]`` or ``yarn``; ignored under
            ``spark-submit``, whose ``--master`` wins.
        extra_conf: Settings applied after (and so overriding) replcheck's defaults.
        jdbc: Put the JDBC drivers of ``jdbc_jars`` on the classpath, so sources that can be
            read over JDBC are (``validator.engines.spark.sources``).
        verbose: Show the JVM's warnings and standard error (``replcheck --verbose``);
            otherwise only its errors are logged, and its standard error is discarded.

    Returns:
        The (possibly already running) session; its log level is set by ``verbose``.

    Raises:
        TerminalError: pyspark is not installed, or its JVM did not start.
    """
    with driver_import("the Spark engine"):
        from pyspark.sql import SparkSession
    _prepare_environment()
    conf = {"spark.app.name": app_name, **_DEFAULT_CONF, **(extra_conf or {})}
    if not under_spark_submit():  # spark-submit's own --master, --jars and JVM decide there
        conf["spark.master"] = master
        if jdbc:
            conf = _with_jars(conf, jdbc_jars())
        conf = _with_log_config(conf, verbose)
        if not verbose:
            _start_quiet_jvm(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(jvm_log_level(verbose))
    logger.info("Spark session %s started on %s", app_name, master)
    return session


def _start_quiet_jvm(conf: Mapping[str, str]) -> None:
    """Start this process's JVM, unless running, with its standard error discarded.

    The JVM prints some start-up warnings itself, past log4j (``WARNING: Using incubator
    modules``, for the ``--add-modules`` Spark's launcher adds). pyspark's ``launch_gateway``
    takes the ``Popen`` arguments; the session built next finds this gateway
    (``SparkContext._ensure_initialized`` uses a gateway already set, as pyspark 4.3 does).

    Raises:
        TerminalError: The JVM did not start (``--verbose`` shows why).
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.errors import PySparkRuntimeError
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    spark_conf = SparkConf().setAll(list(conf.items()))
    try:
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.DEVNULL})
    except PySparkRuntimeError as exc:
        raise TerminalError(f"the Spark JVM did not start (--verbose shows why): {exc}") from exc
    SparkContext._ensure_initialized(gateway=gateway, conf=spark_conf)


class LazySparkSession:
    """A Spark session started on first use: a run whose comparisons all run in their
    databases (``validation.engine``) never pays for the JVM.

    Args:
        master: As for ``build_spark_session``.
        extra_conf: As for ``build_spark_session``.
        jdbc: As for ``build_spark_session``.
        verbose: As for ``build_spark_session``.
    """

    def __init__(
        self,
        master: str = "local[2]",
        extra_conf: Mapping[str, str] | None = None,
        jdbc: bool = True,
        verbose: bool = False,
    ) -> None:
        self._master = master
        self._extra_conf = dict(extra_conf or {})
        self._jdbc = jdbc
        self._verbose = verbose
        self._session: SparkSession | None = None

    def __call__(self) -> SparkSession:
        """The session, started now if it is not running yet."""
        if self._session is None:
            self._session = build_spark_session(
                master=self._master,
                extra_conf=self._extra_conf,
                jdbc=self._jdbc,
                verbose=self._verbose,
            )
        return self._session

    @property
    def started(self) -> bool:
        """Whether a comparison needed Spark."""
        return self._session is not None


def _prepare_environment() -> None:
    """Set the variables the JVM and the Python workers read at launch, unless already set."""
    # Spark otherwise binds to the machine's external interface (DESIGN.md, platform notes).
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers otherwise run whatever `python3` is on PATH, which may lack the
    # drivers and xxhash installed next to this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
