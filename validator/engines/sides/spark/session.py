"""Build the one Spark session a validation run (or a test run) uses.

A cold session plus its first job costs many seconds (DESIGN.md, platform notes), so callers
build one session per process and pass it around, never one per table. A warm Spark across
runs is a Spark Connect server started once (``spark.remote``): each run then only opens a
client session on it (``connect_spark_session``).

The terminal is replcheck's: the JVM this module starts logs through ``log4j2.properties``
beside it (ERROR and above; WARN and above when verbose), and, unless verbose, its standard
error, where the JVM's own start-up warnings go past log4j, is discarded.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_core.drivers import driver_import
from cdc_core.errors import TerminalError, TransientError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from validator.config import SparkConfig

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


# What a Spark Connect client may set on its session: runtime SQL settings. The rest of
# _DEFAULT_CONF (memory, UI, the JVM's logging) belongs to whoever started the server.
_SESSION_CONF_PREFIX = "spark.sql."
# How long to wait for a Spark Connect server to accept a connection: gRPC's own retries of
# an unreachable server go on for minutes before failing.
CONNECT_TIMEOUT_S = 10.0
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
            read over JDBC are (``validator.engines.sides.spark.sources``).
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


class SparkUnreachableError(TransientError):
    """No Spark Connect server answers at the configured ``spark.remote``: no comparison
    that needs Spark can run, so the run stops (exit 2, with one line) instead of each
    comparison failing on it."""


def connect_spark_session(
    remote: str, extra_conf: Mapping[str, str] | None = None, app_name: str = "replcheck"
) -> SparkSession:
    """Open a session on the Spark Connect server at ``remote`` (``sc://host:port``).

    Only runtime SQL settings (``spark.sql.*``: replcheck's defaults, then ``extra_conf``'s)
    are set on the session; the server's own settings (memory, JDBC jars, Python workers)
    are those it was started with.

    Raises:
        SparkUnreachableError: Nothing accepts connections at ``remote``.
        TerminalError: pyspark's Spark Connect client is not installed.
    """
    with driver_import("Spark Connect (spark.remote)"):
        from pyspark.sql import SparkSession
        from pyspark.sql.connect.client import DefaultChannelBuilder

    shown = remote.split(";", 1)[0]  # parameters after ';' may hold a token
    try:
        url = DefaultChannelBuilder(remote).url
        host, port = url.hostname or "", url.port or DefaultChannelBuilder.default_port()
    except ValueError as exc:  # PySparkValueError is one; its text may show a token
        raise TerminalError(
            f"spark.remote {shown!r} is not a Spark Connect URL: write sc://host:port"
        ) from exc
    _check_listening(shown, host, port)
    conf = {"spark.app.name": app_name, **_DEFAULT_CONF, **(extra_conf or {})}
    session = SparkSession.builder.remote(remote).getOrCreate()
    for key, value in conf.items():
        if key.startswith(_SESSION_CONF_PREFIX):
            session.conf.set(key, value)
    logger.info("Spark Connect session opened on %s", shown)
    return session


def _check_listening(shown: str, host: str, port: int) -> None:
    """Fail fast, naming the URL (``shown``) and the fix, when no server listens at
    ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise SparkUnreachableError(
            f"no Spark Connect server answers at {shown} ({exc.strerror or exc}): start one"
            ' ($SPARK_HOME/sbin/start-connect-server.sh, docs/engines.md "Validating against'
            ' the lake quickly") or correct spark.remote, or remove spark.remote to start Spark in'
            " this process"
        ) from exc


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks the session runs at once: the local JVM's own figure; under Spark
    Connect the server's ``spark.default.parallelism`` if set, else this machine's cores
    (a client cannot ask the server's scheduler)."""
    if not is_connect(spark):
        return int(spark.sparkContext.defaultParallelism)
    configured = spark.conf.get("spark.default.parallelism", None)
    return int(configured) if configured else os.cpu_count() or 2


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
        remote: A Spark Connect URL (``spark.remote``): open a session on that server
            instead of starting Spark here (``master``, ``jdbc`` and ``verbose`` unused).
    """

    def __init__(
        self,
        master: str = "local[2]",
        extra_conf: Mapping[str, str] | None = None,
        jdbc: bool = True,
        verbose: bool = False,
        remote: str | None = None,
    ) -> None:
        self._master = master
        self._extra_conf = dict(extra_conf or {})
        self._jdbc = jdbc
        self._verbose = verbose
        self._remote = remote
        self._session: SparkSession | None = None

    def __call__(self) -> SparkSession:
        """The session, started (or, with ``remote``, opened) now if it is not yet."""
        if self._session is None and self._remote is not None:
            self._session = connect_spark_session(self._remote, self._extra_conf)
        if self._session is None:
            self._session = build_spark_session(
                master=self._master,
                extra_conf=self._extra_conf,
                jdbc=self._jdbc,
                verbose=self._verbose,
            )
        return self._session

    @classmethod
    def for_config(cls, settings: SparkConfig, verbose: bool = False) -> LazySparkSession:
        """The session the config's ``spark`` section describes."""
        return cls(settings.master, settings.conf, settings.jdbc, verbose, settings.remote)

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
