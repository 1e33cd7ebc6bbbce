"""A Spark standalone cluster on loopback: one master and one worker, started from the
``spark-class`` pyspark installs beside the interpreter, for tests where a real cluster
matters (executors in their own JVM and Python, started by the worker, not by the test).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

START_TIMEOUT_S = 120.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(argv: list[str], log: Path, environ: Mapping[str, str]) -> subprocess.Popen[bytes]:
    spark_class = Path(sys.executable).with_name("spark-class")
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(spark_class), *argv], stdout=out, stderr=subprocess.STDOUT, env=dict(environ)
        )


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes]) -> None:
    """Wait until ``text`` is in ``log``; fail with the log's tail if it does not come."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while text not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"the Spark {log.stem} did not start ({text!r} not logged): {tail}")
        time.sleep(0.5)


@contextlib.contextmanager
def running_standalone_cluster(work: Path, worker_environ: Mapping[str, str]) -> Iterator[str]:
    """A master and a worker (2 cores, 2 GB) on loopback; the master's URL. The worker, and
    the executors it starts, get ``worker_environ`` only (plus Spark's home and loopback
    address)."""
    work.mkdir(parents=True, exist_ok=True)
    import pyspark

    home = {"SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1"}
    base = {**os.environ, **home}
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    started: list[subprocess.Popen[bytes]] = []
    try:
        master_log = work / "master.log"
        master_args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", "0"]
        master = _start(["org.apache.spark.deploy.master.Master", *master_args], master_log, base)
        started.append(master)
        _wait_for(master_log, "I have been elected leader", master)
        worker_env = {**worker_environ, **home}
        worker_args = [
            *("--host", "127.0.0.1", "--cores", "2", "--memory", "2g"),
            *("--webui-port", "0", "--work-dir", str(work / "worker"), url),
        ]
        worker = _start(
            ["org.apache.spark.deploy.worker.Worker", *worker_args], work / "worker.log", worker_env
        )
        started.append(worker)
        _wait_for(master_log, "Registering worker", master)
        yield url
    finally:
        for process in reversed(started):
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=30)
            if process.poll() is None:
                process.kill()
