"""Private MariaDB and PostgreSQL server processes for tests (fixtures: tests/servers.py),
and a Spark Connect server (``running_spark_connect``: a warm Spark on loopback).

Every server runs from a fresh directory under /tmp, on a free loopback port, with its own
unix socket, and never reads the machine's configuration (MariaDB gets ``--no-defaults``,
PostgreSQL gets every setting on its command line), so the system's own services on
3306/5432 are neither used nor disturbed. Both run in a time zone that is not UTC and has
DST, so time zone bugs show up in tests.

A server is stopped through the handle of the process this module started, never by name:
by the fixture's teardown, else by an atexit hook, else (when the test process is killed
outright) by the kernel, which sends it its stop signal when its parent dies.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import glob
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import pytest

from connectors.mariadb.embedded_server import (
    MariaDBNotInstalledError,
    bootstrap_arguments,
    find_programs,
    install_arguments,
    server_arguments,
)

if TYPE_CHECKING:
    import psycopg
    import pymysql.connections

logger = logging.getLogger(__name__)

INSTALL_HINT = "run `bash scripts/install-system-deps.sh`"
# A zone with DST: a fixed offset would hide bugs that only show across a DST change.
SERVER_TIME_ZONE = "Europe/Berlin"
ROW_IMAGES = ("FULL", "MINIMAL", "NOBLOB")
LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0

_PR_SET_PDEATHSIG = 1
# Loaded here, in the parent: the forked child must only call it, not load a library.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


class ServerStartError(RuntimeError):
    """A private server did not start; the message carries the tail of its log."""


class _PortTakenError(ServerStartError):
    """Another process took the free port between choosing it and the server binding it."""


def _url_userinfo(user: str, password: str) -> str:
    return quote(user) if not password else f"{quote(user)}:{quote(password)}"


@dataclass(frozen=True, slots=True)
class MariaDBServer:
    """Connection facts of a running private MariaDB server (user ``root``, no password)."""

    host: str
    port: int
    user: str
    password: str
    socket: Path
    pid: int
    datadir: Path
    binlog_row_image: str
    time_zone: str

    def url(self, database: str = "test") -> str:
        """SQLAlchemy URL of ``database`` on this server."""
        userinfo = _url_userinfo(self.user, self.password)
        return f"mysql+pymysql://{userinfo}@{self.host}:{self.port}/{database}"

    def connect(self, database: str | None = "test") -> pymysql.connections.Connection[Any]:
        """Open an autocommit pymysql connection over TCP (``None``: no default database)."""
        import pymysql

        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=database,
            charset="utf8mb4",
            autocommit=True,
            ssl_disabled=True,  # no TLS here; pymysql 1.2 loads the CA store per connection
        )


@dataclass(frozen=True, slots=True)
class PostgresServer:
    """Connection facts of a running private PostgreSQL cluster (superuser ``postgres``)."""

    host: str
    port: int
    user: str
    password: str
    socket_dir: Path
    pid: int
    datadir: Path
    time_zone: str

    def url(self, database: str = "test") -> str:
        """SQLAlchemy URL of ``database`` on this server (psycopg 3 driver)."""
        userinfo = _url_userinfo(self.user, self.password)
        return f"postgresql+psycopg://{userinfo}@{self.host}:{self.port}/{database}"

    def dsn(self, database: str = "test") -> str:
        """libpq connection string, e.g. for psycopg2's logical replication connection."""
        dsn = f"host={self.host} port={self.port} user={self.user} dbname={database}"
        return f"{dsn} password={self.password}" if self.password else dsn

    def connect(self, database: str = "test") -> psycopg.Connection[Any]:
        """Open an autocommit psycopg (v3) connection over TCP."""
        import psycopg

        return psycopg.connect(self.dsn(database), autocommit=True)


# --- process plumbing -------------------------------------------------------------------


def _die_with_parent(death_signal: signal.Signals) -> None:
    """Runs in the forked child: ask the kernel for ``death_signal`` when the parent dies."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(death_signal))


def _as_user(user: pwd.struct_passwd | None) -> dict[str, Any]:
    """subprocess arguments that drop to ``user`` (group and supplementary groups too)."""
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _run(
    argv: Sequence[str],
    log_path: Path,
    cwd: Path,
    run_as: pwd.struct_passwd | None = None,
    input_bytes: bytes | None = None,
) -> None:
    """Run a set-up command to completion, appending its output to ``log_path``."""
    stdin: dict[str, Any] = {"input": input_bytes} if input_bytes else {"stdin": subprocess.DEVNULL}
    with log_path.open("ab") as log:
        result = subprocess.run(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            timeout=START_TIMEOUT_S,
            check=False,
            **stdin,
            **_as_user(run_as),
        )
    if result.returncode != 0:
        raise ServerStartError(f"{argv[0]} exited with {result.returncode}:\n{_tail(log_path)}")


def _spawn(
    argv: Sequence[str],
    log_path: Path,
    cwd: Path,
    run_as: pwd.struct_passwd | None,
    death_signal: signal.Signals,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a server process in its own session, its output going to ``log_path``."""
    with log_path.open("ab") as log:
        # Own session: a Ctrl-C in the terminal reaches pytest, whose teardown stops the
        # server in order, instead of hitting the server directly.
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=functools.partial(_die_with_parent, death_signal),
            env=env,
            **_as_user(run_as),
        )


def _tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _another_server(port: int, answered: object, ours: str) -> str | None:
    """Why the server on ``port`` is not ready when another one answered there (two
    servers started at once can pick the same free port; the later one then exits with
    "Address already in use" and is started again on another port); None: it is ours."""
    if answered == ours:
        return None
    return f"port {port} is another server's ({answered})"


def _make_root_dir(kind: str, owner: pwd.struct_passwd | None) -> Path:
    # Under /tmp rather than pytest's tmp_path: unix socket paths must stay under 108 bytes,
    # and an unprivileged server user cannot enter pytest's root-owned 0700 base directory.
    root = Path(tempfile.mkdtemp(prefix=f"replcheck-{kind}-", dir="/tmp"))
    if owner is not None:
        os.chown(root, owner.pw_uid, owner.pw_gid)
    return root


def _require(path: str | None, what: str) -> str:
    if path is None or not os.access(path, os.X_OK):
        pytest.fail(f"{what} not found: {INSTALL_HINT}", pytrace=False)
    return path


# --- the server lifecycle ---------------------------------------------------------------

_RUNNING: set[_PrivateServer] = set()


class _PrivateServer(ABC):
    """One server process in its own temporary directory, with bounded start and stop."""

    kind: str
    stop_signal: signal.Signals

    def __init__(self, run_as: pwd.struct_passwd | None) -> None:
        self.run_as = run_as
        self.root = _make_root_dir(self.kind, run_as)
        self.port = _free_port()
        self.log_path = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @abstractmethod
    def _initialize(self) -> None:
        """Create the data directory."""

    @abstractmethod
    def _argv(self) -> list[str]:
        """Command line of the server process."""

    @abstractmethod
    def _ping(self) -> str | None:
        """None if the server accepts a client connection now, else why it does not."""

    @abstractmethod
    def _after_start(self) -> None:
        """Create the objects every test expects (database ``test``)."""

    def _environment(self) -> dict[str, str] | None:
        """The server's environment (None: this process's)."""
        return None

    def start(self) -> None:
        _RUNNING.add(self)
        started = time.monotonic()
        try:
            self._initialize()
            argv = self._argv()
            self.process = _spawn(
                argv, self.log_path, self.root, self.run_as, self.stop_signal, self._environment()
            )
            self._wait_until_ready()
            self._after_start()
        except BaseException:
            self.stop()
            raise
        elapsed = time.monotonic() - started
        logger.info("%s started on port %s in %.1f s", self.kind, self.port, elapsed)

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while (not_ready := self._ping()) is not None:
            code = self.process.poll()
            if code is not None:
                log = _tail(self.log_path)
                # "EADDRINUSE: address already in use" from Node (Azurite).
                taken = "address already in use" in log.lower()
                error = _PortTakenError if taken else ServerStartError
                raise error(f"{self.kind} exited with {code} while starting:\n{log}")
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"{self.kind} not ready after {START_TIMEOUT_S} s ({not_ready}):\n"
                    f"{_tail(self.log_path)}"
                )
            time.sleep(0.1)

    def halt(self) -> None:
        """Stop the server as its stop signal does (a fast shutdown), keeping its data and
        port: a source that goes away mid-stream. ``resume`` starts it again."""
        self._end_process()

    def resume(self) -> None:
        """Start the halted server again, on the same port, with the same data."""
        self.process = _spawn(
            self._argv(),
            self.log_path,
            self.root,
            self.run_as,
            self.stop_signal,
            self._environment(),
        )
        self._wait_until_ready()

    def stop(self) -> None:
        """Stop the process this object started (bounded, then SIGKILL) and remove its dir."""
        self._end_process()
        shutil.rmtree(self.root, ignore_errors=True)
        _RUNNING.discard(self)

    def _end_process(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # Popen refuses to signal a process it has already reaped, so a recycled pid
            # can never be hit.
            self.process.send_signal(self.stop_signal)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                logger.warning(
                    "%s pid %s ignored %s; killing it",
                    self.kind,
                    self.process.pid,
                    self.stop_signal.name,
                )
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)


@atexit.register
def _stop_all() -> None:
    """Fallback for runs whose fixture teardown never ran."""
    for server in list(_RUNNING):
        try:
            server.stop()
        except Exception:
            logger.exception("could not stop %s in %s", server.kind, server.root)


def _start_on_free_port(factory: Callable[[], _PrivateServer], attempts: int = 3) -> _PrivateServer:
    """Start a server, choosing another port if one was taken in the meantime."""
    for attempt in range(1, attempts + 1):
        server = factory()
        try:
            server.start()
        except _PortTakenError:
            if attempt == attempts:
                raise
            logger.warning("%s port %s was taken; retrying", server.kind, server.port)
        else:
            return server
    raise AssertionError("unreachable")


# --- MariaDB ----------------------------------------------------------------------------


def _mariadb_programs() -> dict[str, str]:
    """The product's own search for the server's programs (embedded_server.py), failing the
    test with the install hint when they are missing."""
    try:
        return find_programs()
    except MariaDBNotInstalledError as exc:
        pytest.fail(f"{exc.message}: {INSTALL_HINT}", pytrace=False)


def _mariadb_program(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    return _require(found, f"MariaDB's {name}")


class _MariaDBProcess(_PrivateServer):
    kind = "mariadb"
    stop_signal = signal.SIGTERM  # normal shutdown

    def __init__(self, binlog_row_image: str, server_id: int = 1) -> None:
        if binlog_row_image not in ROW_IMAGES:
            raise ValueError(f"binlog_row_image must be one of {ROW_IMAGES}")
        programs = _mariadb_programs()
        self.mariadbd, self.install_db = programs["mariadbd"], programs["mariadb-install-db"]
        self.tzinfo_to_sql = _mariadb_program("mariadb-tzinfo-to-sql")
        super().__init__(run_as=None)
        self.binlog_row_image = binlog_row_image
        self.server_id = server_id
        self.datadir = self.root / "data"
        self.socket = self.root / "mariadb.sock"

    def _initialize(self) -> None:
        _run([self.install_db, *install_arguments(self.datadir)], self.log_path, self.root)
        # --default-time-zone needs the zone in the time zone tables before the server
        # starts: load just the zones we use, in bootstrap mode (much faster than loading
        # all of /usr/share/zoneinfo).
        _run(
            [self.mariadbd, *bootstrap_arguments(self.datadir)],
            self.log_path,
            self.root,
            input_bytes=self._time_zone_sql(),
        )

    def _time_zone_sql(self) -> bytes:
        sql = [b"USE mysql;\n"]
        for zone in (SERVER_TIME_ZONE, "UTC"):
            zone_file = Path("/usr/share/zoneinfo") / zone
            if not zone_file.exists():
                pytest.fail(f"{zone_file} missing (tzdata): {INSTALL_HINT}", pytrace=False)
            sql.append(
                subprocess.run(
                    [self.tzinfo_to_sql, str(zone_file), zone], capture_output=True, check=True
                ).stdout
            )
        return b"".join(sql)

    def _argv(self) -> list[str]:
        # The product's own private-server options (connectors/mariadb/embedded_server.py),
        # plus the time zone the tests pin so that zone handling is exercised.
        options = server_arguments(self.datadir, self.port, self.binlog_row_image, self.server_id)
        return [self.mariadbd, *options, f"--default-time-zone={SERVER_TIME_ZONE}"]

    def _ping(self) -> str | None:
        import pymysql

        try:
            connection = pymysql.connect(
                host=LOOPBACK, port=self.port, user="root", connect_timeout=2
            )
            with contextlib.closing(connection), connection.cursor() as cursor:
                cursor.execute("SELECT @@socket")
                (answered,) = cursor.fetchone()
        except pymysql.err.OperationalError as exc:
            return str(exc)
        return _another_server(self.port, answered, str(self.socket))

    def _after_start(self) -> None:
        with contextlib.closing(self.handle().connect(database=None)) as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS test")

    def handle(self) -> MariaDBServer:
        assert self.process is not None
        return MariaDBServer(
            host=LOOPBACK,
            port=self.port,
            user="root",
            password="",
            socket=self.socket,
            pid=self.process.pid,
            datadir=self.datadir,
            binlog_row_image=self.binlog_row_image,
            time_zone=SERVER_TIME_ZONE,
        )


@contextlib.contextmanager
def running_mariadb(binlog_row_image: str = "FULL") -> Iterator[MariaDBServer]:
    """Run a private MariaDB server for the duration of the ``with`` block."""
    server = _start_on_free_port(lambda: _MariaDBProcess(binlog_row_image))
    assert isinstance(server, _MariaDBProcess)
    try:
        yield server.handle()
    finally:
        server.stop()


class _TlsMariaDBProcess(_MariaDBProcess):
    """A private MariaDB server offering TLS with the given certificate (``tests.tls_certs``)."""

    def __init__(self, cert: Path, key: Path, ca: Path) -> None:
        super().__init__("FULL")
        self.tls = (f"--ssl-cert={cert}", f"--ssl-key={key}", f"--ssl-ca={ca}")

    def _argv(self) -> list[str]:
        return [*super()._argv(), *self.tls]


@contextlib.contextmanager
def running_tls_mariadb(cert: Path, key: Path, ca: Path) -> Iterator[MariaDBServer]:
    """Run a private MariaDB server (FULL row images) that offers TLS with ``cert``."""
    server = _start_on_free_port(lambda: _TlsMariaDBProcess(cert, key, ca))
    assert isinstance(server, _TlsMariaDBProcess)
    try:
        yield server.handle()
    finally:
        server.stop()


@contextlib.contextmanager
def haltable_mariadb() -> Iterator[_MariaDBProcess]:
    """A private MariaDB server (FULL row images) of the caller's own, to ``halt`` and
    ``resume`` (the session's shared servers must stay up for the other tests)."""
    server = _start_on_free_port(lambda: _MariaDBProcess("FULL"))
    assert isinstance(server, _MariaDBProcess)
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def running_mariadb_replica(primary: MariaDBServer) -> Iterator[MariaDBServer]:
    """Run a private MariaDB server replicating ``primary`` (GTID, from its current
    position: what the primary writes from now on reaches the replica)."""
    server = _start_on_free_port(lambda: _MariaDBProcess(primary.binlog_row_image, 2))
    assert isinstance(server, _MariaDBProcess)
    try:
        replica = server.handle()
        with contextlib.closing(primary.connect(None)) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@gtid_binlog_pos")
            (position,) = cur.fetchone()
        with contextlib.closing(replica.connect(None)) as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL gtid_slave_pos = %s", (position,))
            cur.execute(
                f"CHANGE MASTER TO MASTER_HOST='{LOOPBACK}', MASTER_PORT={primary.port},"
                " MASTER_USER='root', MASTER_USE_GTID=slave_pos"
            )
            cur.execute("START SLAVE")
        yield replica
    finally:
        server.stop()


# --- PostgreSQL -------------------------------------------------------------------------

_POSTGRES_SETTINGS = {
    "listen_addresses": LOOPBACK,
    "wal_level": "logical",
    "max_replication_slots": "10",
    "max_wal_senders": "10",
    # PREPARE TRANSACTION (two-phase commits of the generative tests) needs slots for them.
    "max_prepared_transactions": "10",
    "TimeZone": SERVER_TIME_ZONE,
    # Durability does not matter for a throwaway cluster; speed does.
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "16MB",
}

# What a cluster started "with default settings" leaves at the server's own defaults
# (wal_level = replica: no logical decoding), as many installations and managed services run.
_POSTGRES_FEATURE_SETTINGS = (
    "wal_level",
    "max_replication_slots",
    "max_wal_senders",
    "max_prepared_transactions",
)

_POSTGRES_HBA = """\
local all all trust
host all all 127.0.0.1/32 trust
local replication all trust
host replication all 127.0.0.1/32 trust
"""


def _postgres_bindir() -> Path:
    def version(path: str) -> int:
        return int(Path(path).parent.parent.name) if Path(path).parent.parent.name.isdigit() else 0

    # Not /usr/local/bin or PATH: this machine kind has odd wrappers there.
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=version)
    return Path(_require(found[-1] if found else None, "PostgreSQL's postgres")).parent


def _postgres_run_user() -> pwd.struct_passwd | None:
    # PostgreSQL refuses to run as root; as root, run the cluster as `nobody`.
    return pwd.getpwnam("nobody") if os.geteuid() == 0 else None


class _PostgresProcess(_PrivateServer):
    kind = "postgres"
    stop_signal = signal.SIGINT  # fast shutdown: roll back open transactions, then exit

    def __init__(self, server_defaults: bool = False) -> None:
        self.bindir = _postgres_bindir()
        super().__init__(run_as=_postgres_run_user())
        self.datadir = self.root / "data"
        self.server_defaults = server_defaults

    def _initialize(self) -> None:
        _run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "-U",
                "postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ],
            self.log_path,
            self.root,
            run_as=self.run_as,
        )
        (self.datadir / "pg_hba.conf").write_text(_POSTGRES_HBA)

    def _argv(self) -> list[str]:
        settings = {
            **_POSTGRES_SETTINGS,
            "port": str(self.port),
            "unix_socket_directories": str(self.root),
        }
        if self.server_defaults:
            settings = {k: v for k, v in settings.items() if k not in _POSTGRES_FEATURE_SETTINGS}
        options = [arg for key, value in settings.items() for arg in ("-c", f"{key}={value}")]
        return [str(self.bindir / "postgres"), "-D", str(self.datadir), *options]

    def _ping(self) -> str | None:
        import psycopg

        try:
            with psycopg.connect(self.handle().dsn("postgres"), connect_timeout=2) as connection:
                row = connection.execute("SHOW data_directory").fetchone()
        except psycopg.OperationalError as exc:
            return str(exc)
        return _another_server(self.port, row[0] if row else None, str(self.datadir))

    def _after_start(self) -> None:
        with contextlib.closing(self.handle().connect("postgres")) as conn:
            conn.execute("CREATE DATABASE test")

    def handle(self) -> PostgresServer:
        assert self.process is not None
        return PostgresServer(
            host=LOOPBACK,
            port=self.port,
            user="postgres",
            password="",
            socket_dir=self.root,
            pid=self.process.pid,
            datadir=self.datadir,
            time_zone=SERVER_TIME_ZONE,
        )


class _PostgresStandby(_PostgresProcess):
    """A physical standby of another private cluster: a base backup of it, streaming its WAL."""

    def __init__(self, primary: PostgresServer) -> None:
        super().__init__()
        self.primary = primary

    def _initialize(self) -> None:
        _run(
            [
                str(self.bindir / "pg_basebackup"),
                f"--pgdata={self.datadir}",
                f"--host={LOOPBACK}",
                f"--port={self.primary.port}",
                "--username=postgres",
                "--write-recovery-conf",
                "--checkpoint=fast",
                "--no-sync",
            ],
            self.log_path,
            self.root,
            run_as=self.run_as,
        )

    def _after_start(self) -> None:
        pass  # read-only: the primary's databases arrive through its WAL


@contextlib.contextmanager
def running_postgres_standby(primary: PostgresServer) -> Iterator[PostgresServer]:
    """Run a physical standby of ``primary`` for the duration of the ``with`` block."""
    server = _start_on_free_port(lambda: _PostgresStandby(primary))
    assert isinstance(server, _PostgresStandby)
    try:
        yield server.handle()
    finally:
        server.stop()


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    """Run a private PostgreSQL cluster for the duration of the ``with`` block."""
    server = _start_on_free_port(_PostgresProcess)
    assert isinstance(server, _PostgresProcess)
    try:
        yield server.handle()
    finally:
        server.stop()


@contextlib.contextmanager
def running_default_postgres() -> Iterator[PostgresServer]:
    """Run a private PostgreSQL cluster with the server's default ``wal_level`` (replica),
    replication slots and prepared transactions, for the duration of the ``with`` block."""
    server = _start_on_free_port(functools.partial(_PostgresProcess, server_defaults=True))
    assert isinstance(server, _PostgresProcess)
    try:
        yield server.handle()
    finally:
        server.stop()


@contextlib.contextmanager
def haltable_postgres() -> Iterator[_PostgresProcess]:
    """A private PostgreSQL cluster of the caller's own, to ``halt`` and ``resume`` (the
    session's shared cluster must stay up for the other tests)."""
    with served(_PostgresProcess) as server:
        yield server


Server = TypeVar("Server", bound=_PrivateServer)


@contextlib.contextmanager
def served(kind: type[Server]) -> Iterator[Server]:
    """A server of ``kind`` on a free loopback port, stopped when the block ends."""
    server = _start_on_free_port(kind)
    assert isinstance(server, kind)
    try:
        yield server
    finally:
        server.stop()


def drop_postgres_database(server: PostgresServer, name: str) -> None:
    """Drop a database with whatever sessions and replication slots still use it."""
    with contextlib.closing(server.connect("postgres")) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = %s",
            (name,),
        )
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE database = %s",
            (name,),
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- Spark Connect ----------------------------------------------------------------------


class _SparkConnectProcess(_PrivateServer):
    """A Spark Connect server (pyspark's ``sbin/start-connect-server.sh --wait``: in the
    foreground, so this module owns its process) on a free loopback port, ``local[2]``.

    Its Python workers run this interpreter with this checkout first on their path, as
    ``replcheck validate`` here does; its JVM logs through replcheck's log4j2 settings.
    """

    kind = "spark-connect"
    stop_signal = signal.SIGTERM

    def __init__(self) -> None:
        super().__init__(run_as=None)

    def _initialize(self) -> None:
        pass

    def _argv(self) -> list[str]:
        import pyspark

        from validator.engines.sides.spark.session import LOG4J_CONFIG

        home = Path(pyspark.__file__).parent
        conf = {
            "spark.connect.grpc.binding.address": LOOPBACK,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"
            " -Dreplcheck.jvm.log.level=WARN",
        }
        settings = [part for key, value in conf.items() for part in ("--conf", f"{key}={value}")]
        script = str(home / "sbin" / "start-connect-server.sh")
        return [script, "--wait", "--master", "local[2]", *settings]

    def _environment(self) -> dict[str, str]:
        import pyspark

        checkout = str(Path(__file__).resolve().parents[1])
        return {
            **os.environ,
            "SPARK_HOME": str(Path(pyspark.__file__).parent),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_LOG_DIR": str(self.root),
            "SPARK_PID_DIR": str(self.root),
            "PYSPARK_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")])),
        }

    def _ping(self) -> str | None:
        try:
            socket.create_connection((LOOPBACK, self.port), timeout=1).close()
        except OSError as exc:
            return str(exc)
        return None

    def _after_start(self) -> None:
        pass

    def stop(self) -> None:
        """The JVM is a child of the script started: signal the process group (its id is
        the script's, started in its own session) before the script itself."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, self.stop_signal)
        super().stop()

    @property
    def url(self) -> str:
        """The server's Spark Connect URL."""
        return f"sc://{LOOPBACK}:{self.port}"


@contextlib.contextmanager
def running_spark_connect() -> Iterator[str]:
    """Run a Spark Connect server for the ``with`` block; yields its ``sc://`` URL."""
    server = _start_on_free_port(_SparkConnectProcess)
    assert isinstance(server, _SparkConnectProcess)
    try:
        yield server.url
    finally:
        server.stop()
