"""A private, throwaway MariaDB server started from the installed binaries (for the demo).

The server runs from a fresh directory, on a free loopback port, with its own socket, and
never reads the machine's configuration (``--no-defaults``), so the system's own MariaDB
service is neither used nor disturbed. Its binlog is what the CDC pipeline reads: ROW
format with column names (``binlog_row_metadata=FULL``) and the chosen row image. The
server is stopped through the handle of the process started here, never by name, and the
kernel stops it if this process dies first (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cdc_core.drivers import driver_import
from cdc_core.errors import ConfigError, TransientError

LOOPBACK = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
INNODB_LOG_FILE_SIZE = "--innodb-log-file-size=16M"  # the same at install, bootstrap and start
PROGRAMS = ("mariadbd", "mariadb-install-db")
BIN_VARIABLE = "REPLCHECK_MARIADB_BIN"  # a directory holding the programs, if not on PATH
INSTALL_HINT = (
    "install MariaDB's server binaries: `apt-get install mariadb-server` (Debian/Ubuntu), or"
    " run `bash scripts/install-system-deps.sh`"
)
_PR_SET_PDEATHSIG = 1
# Loaded in the parent: the forked child must only call it, not load a library.
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


class MariaDBNotInstalledError(ConfigError):
    """The MariaDB server binaries are not on this machine (the message says what to install)."""


class ServerStartError(TransientError):
    """The private server did not start; the message carries the tail of its log."""


@dataclass(frozen=True, slots=True)
class EmbeddedServer:
    """A running private server: user ``root`` without password, over TCP on loopback."""

    port: int
    root: Path  # data directory, socket and log live below it
    binlog_row_image: str

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` on this server."""
        return f"mysql+pymysql://root@{LOOPBACK}:{self.port}/{database}"

    @property
    def log_path(self) -> Path:
        """The server's own log (start-up errors land here)."""
        return self.root / "server.log"


def find_programs() -> dict[str, str]:
    """Paths of ``mariadbd`` and ``mariadb-install-db``: in ``$REPLCHECK_MARIADB_BIN`` if
    set (e.g. ``/opt/mariadb/bin``), else on ``PATH`` or in ``/usr/sbin``, ``/usr/bin``.

    Raises:
        MariaDBNotInstalledError: One of them is missing (names it and the install command).
    """
    directory = os.environ.get(BIN_VARIABLE)
    found = {}
    for name in PROGRAMS:
        if directory is not None:
            path = shutil.which(name, path=directory)
        else:
            path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
        if path is None:
            raise MariaDBNotInstalledError(
                f"MariaDB's {name} is not installed (or not in ${BIN_VARIABLE}), so no private"
                f" server can be started; {INSTALL_HINT}",
                {"program": name},
            )
        found[name] = path
    return found


def server_arguments(
    datadir: Path, port: int, binlog_row_image: str, server_id: int = 1
) -> list[str]:
    """The server's options: loopback only, a binlog the CDC pipeline can read, small and fast
    (a replica of another private server takes another ``server_id``)."""
    return [
        "--no-defaults",
        *_user(),
        f"--datadir={datadir}",
        f"--socket={datadir.parent / 'mariadb.sock'}",
        f"--pid-file={datadir.parent / 'mariadbd.pid'}",
        f"--port={port}",
        f"--bind-address={LOOPBACK}",
        "--skip-name-resolve",
        f"--server-id={server_id}",
        "--log-bin=mariadb-bin",
        "--binlog-format=ROW",
        "--binlog-row-metadata=FULL",
        f"--binlog-row-image={binlog_row_image}",
        # MariaDB's compiled-in default is latin1; distributions configure utf8mb4.
        "--character-set-server=utf8mb4",
        "--collation-server=utf8mb4_general_ci",
        "--innodb-buffer-pool-size=64M",
        INNODB_LOG_FILE_SIZE,
        "--innodb-flush-log-at-trx-commit=2",  # a throwaway server: speed over durability
    ]


@contextlib.contextmanager
def running_server(binlog_row_image: str = "MINIMAL") -> Iterator[EmbeddedServer]:
    """Start a private server for the ``with`` block; stop it and remove its files after.

    Raises:
        MariaDBNotInstalledError: The binaries are missing.
        ServerStartError: The server did not come up (the message has its log's tail).
    """
    programs = find_programs()
    # Under /tmp: a unix socket path must stay under 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="replcheck-mariadb-", dir="/tmp"))
    server = EmbeddedServer(_free_port(), root, binlog_row_image)
    process = None
    try:
        _install(programs["mariadb-install-db"], server)
        argv = [
            programs["mariadbd"],
            *server_arguments(root / "data", server.port, binlog_row_image),
        ]
        process = _spawn(argv, server.log_path)
        _wait_until_ready(server, process)
        yield server
    finally:
        if process is not None:
            _stop(process)
        shutil.rmtree(root, ignore_errors=True)


def _user() -> list[str]:
    return ["--user=root"] if os.geteuid() == 0 else []  # mariadbd refuses root unless told


def install_arguments(datadir: Path) -> list[str]:
    """``mariadb-install-db``'s options for a private server's data directory."""
    return [
        "--no-defaults",
        f"--datadir={datadir}",
        *_user(),
        "--auth-root-authentication-method=normal",
        "--skip-test-db",
        INNODB_LOG_FILE_SIZE,
    ]


def bootstrap_arguments(datadir: Path) -> list[str]:
    """``mariadbd --bootstrap``'s options (SQL on stdin before the first start, e.g. the
    time zone tables a ``--default-time-zone`` needs)."""
    return ["--no-defaults", "--bootstrap", f"--datadir={datadir}", *_user(), INNODB_LOG_FILE_SIZE]


def _install(install_db: str, server: EmbeddedServer) -> None:
    argv = [install_db, *install_arguments(server.root / "data")]
    with server.log_path.open("ab") as log:
        result = subprocess.run(
            argv, stdout=log, stderr=subprocess.STDOUT, timeout=START_TIMEOUT_S, check=False
        )
    if result.returncode != 0:
        raise ServerStartError(f"mariadb-install-db failed:\n{_tail(server.log_path)}")


def _die_with_parent() -> None:
    """Runs in the forked child: the kernel stops the server if its parent dies."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        # Its own session: a Ctrl-C reaches replcheck, which stops the server in order.
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def _wait_until_ready(server: EmbeddedServer, process: subprocess.Popen[bytes]) -> None:
    with driver_import("the embedded MariaDB server"):
        import pymysql

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            pymysql.connect(host=LOOPBACK, port=server.port, user="root", connect_timeout=2).close()
            return
        except pymysql.err.OperationalError as exc:
            if process.poll() is not None or time.monotonic() > deadline:
                raise ServerStartError(
                    f"the private MariaDB server did not start ({exc.args[-1]}):\n"
                    f"{_tail(server.log_path)}"
                ) from exc
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (a normal shutdown), bounded; then SIGKILL."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_TIMEOUT_S)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 20) -> str:
    if not path.exists():
        return f"(no log at {path})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
