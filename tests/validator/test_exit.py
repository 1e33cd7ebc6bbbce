"""The command line's quick exit (``validator.cli._exit``): it skips the interpreter's
teardown but never what a finished command still owes: its exit code, its buffered output,
its exit handlers, and a thread that is still working."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _run(program: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", textwrap.dedent(program)]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_exit_keeps_the_code_the_buffered_output_and_the_exit_handlers(tmp_path: Path) -> None:
    marker = tmp_path / "handler-ran"
    result = _run(
        f"""
        import atexit, pathlib, sys
        from validator.cli import _exit
        atexit.register(pathlib.Path({str(marker)!r}).write_text, "ran")
        sys.stdout.write("line\\n" * 5000)  # buffered: the output is a pipe
        sys.stderr.write("last words")
        _exit(3)
        """
    )
    assert result.returncode == 3
    assert result.stdout == "line\n" * 5000
    assert result.stderr == "last words"
    assert marker.read_text() == "ran"


def test_exit_waits_for_a_thread_that_still_works(tmp_path: Path) -> None:
    marker = tmp_path / "thread-done"
    result = _run(
        f"""
        import pathlib, threading, time
        from validator.cli import _exit
        def work():
            time.sleep(0.5)
            pathlib.Path({str(marker)!r}).write_text("done")
        threading.Thread(target=work).start()
        _exit(4)
        """
    )
    assert result.returncode == 4
    assert marker.read_text() == "done"
