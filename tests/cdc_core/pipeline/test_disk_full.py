"""A full disk under the lake or the state directory (issue 37, item 4).

``replcheck cdc run`` must exit 2 with one line saying "no space left on device" and naming
what it was writing (never a traceback or "a replcheck bug"), leave nothing half-written,
and, once space is freed, resume and give a lake that holds every change exactly once.

The disks are real: a tmpfs of a few hundred KiB mounted for the test and grown with
``remount`` to free space (root only; the tests skip, saying why, where mounting is refused).
The writers the pipeline runs do not all fill the disk first, so each one is also filled
under directly: the checkpoint, the progress file, a spill segment and the row image store.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cdc_core.buffer.spill import TransactionSpill
from cdc_core.capture.position import Position
from cdc_core.disk_full import is_disk_full
from cdc_core.errors import DiskFullError
from cdc_core.lake.layout import read_progress, write_progress
from cdc_core.pipeline.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from cdc_core.rebuild.image_store import RowImageStore
from cdc_core.state.lmdb_file import check_data_file
from connectors.synthetic.log_reader import spec_of_url
from connectors.synthetic.workload import Workload
from tests.cdc_core.kill_loop import compare_lake, write_config
from tests.cdc_core.lake_model import read_delta
from tests.cli_runs import catch_up

# 2,000 rows loaded, then 3,500 log entries: a tmpfs of 512 KB (the lake) or 448 KB (the
# state directory) fills after the initial load, while the log is streamed; 64 MB is room.
URL = "synthetic:///?seed=3&transactions=600&tables=2&initial_rows=1000&concurrency=4"
TABLES = ["synthetic.t0", "synthetic.t1"]
ROOMY = "64m"


@dataclass(frozen=True, slots=True)
class Tmpfs:
    """A tmpfs mounted at ``directory`` for one test."""

    directory: Path

    def grow(self, size: str) -> None:
        """Free space: the file system becomes ``size`` large."""
        done = _mount("-o", f"remount,size={size}", str(self.directory))
        assert done.returncode == 0, done.stderr

    def fill(self) -> None:
        """Take every free byte with a file of zeros."""
        with contextlib.suppress(OSError), (self.directory / "filler").open("wb") as filler:
            while True:
                filler.write(bytes(1 << 16))
                filler.flush()

    def empty(self) -> None:
        """Give back what ``fill`` took."""
        (self.directory / "filler").unlink()


def _mount(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *arguments], capture_output=True, text=True, check=False)


@pytest.fixture
def tmpfs() -> Iterator[Callable[[Path, str], Tmpfs]]:
    """Mounts a tmpfs of a given size at a directory; unmounted after the test."""
    mounted: list[Path] = []

    def mount(directory: Path, size: str) -> Tmpfs:
        directory.mkdir(parents=True, exist_ok=True)
        if shutil.which("mount") is None:
            pytest.skip("no mount(8) here: the disk-full tests mount a small tmpfs")
        done = _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
        mounted.append(directory)
        return Tmpfs(directory)

    yield mount
    for directory in reversed(mounted):
        if subprocess.run(["umount", str(directory)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(directory)], check=False)  # still busy


def _assert_says_disk_full(config: Path, under: Path) -> None:
    """``cdc run`` exits 2 with one line naming a file under ``under``, and no Python
    traceback.

    (delta-rs may print a panic of one of its Rust threads before that line: its runtime
    writes it to stderr, where replcheck cannot word it.)"""
    run = catch_up(config, "soak", expect=2)
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: no space left on device writing {under}/"), run.stderr
    assert "resumes from the last checkpoint" in last
    assert "Traceback" not in run.stderr
    assert "replcheck bug" not in run.stderr


def _assert_loaded(state_dir: Path) -> Checkpoint:
    """The checkpoint reads whole and has the initial load: the next run resumes from it."""
    checkpoint = read_checkpoint(state_dir)
    assert checkpoint is not None and sorted(checkpoint.loaded) == TABLES
    return checkpoint


def _assert_no_temporary_files(directory: Path) -> None:
    assert [p for p in directory.rglob("*") if p.name.endswith(".tmp")] == []


def _assert_resumes_once_freed(disk: Tmpfs, config: Path, lake: Path) -> None:
    """Once ``disk`` has room, ``cdc run`` resumes and the lake holds every change once."""
    disk.grow(ROOMY)
    catch_up(config, "soak")
    assert compare_lake(lake, Workload(spec_of_url(URL))) == []


@pytest.mark.integration
def test_full_lake_exits_2_naming_the_table_and_resumes_once_space_is_freed(
    tmp_path: Path, tmpfs: Callable[[Path, str], Tmpfs]
) -> None:
    lake = tmpfs(tmp_path / "lake", "512k")
    config = write_config(tmp_path, URL)

    _assert_says_disk_full(config, lake.directory)
    _assert_loaded(tmp_path / "state")

    for log in lake.directory.rglob("_delta_log"):
        read_delta(log.parent)  # every Delta table reads whole: no half-written commit
    read_progress(lake.directory)  # the progress file too
    _assert_no_temporary_files(lake.directory)
    _assert_resumes_once_freed(lake, config, lake.directory)


@pytest.mark.integration
def test_full_state_directory_exits_2_naming_the_file_and_resumes_once_space_is_freed(
    tmp_path: Path, tmpfs: Callable[[Path, str], Tmpfs]
) -> None:
    state = tmpfs(tmp_path / "state", "448k")
    config = write_config(tmp_path, URL)

    _assert_says_disk_full(config, state.directory)

    checkpoint = _assert_loaded(state.directory)
    for transaction in checkpoint.buffer.transactions if checkpoint.buffer else ():
        for segment in transaction.segments:  # the spill segments it refers to are whole
            assert (state.directory / "spill" / segment.name).stat().st_size == segment.size_bytes
    check_data_file(state.directory / "images" / "data.mdb")
    _assert_no_temporary_files(state.directory)
    _assert_resumes_once_freed(state, config, tmp_path / "lake")


# -- each writer of the lake and the state directory, on a disk filled by the test ----------


def _writing(path: Path) -> str:
    """The pattern of a ``DiskFullError`` message naming ``path``."""
    return re.escape(f"no space left on device writing {path}: ")


def _checkpoint(position: int) -> Checkpoint:
    return Checkpoint("soak", Position.of(position), None, None, shapes={"t": "x" * 4000})


def test_checkpoint_on_a_full_disk_keeps_the_previous_one(
    tmp_path: Path, tmpfs: Callable[[Path, str], Tmpfs]
) -> None:
    state = tmpfs(tmp_path / "state", "256k")
    write_checkpoint(state.directory, _checkpoint(1))
    state.fill()

    with pytest.raises(DiskFullError, match=_writing(state.directory / "checkpoint")):
        write_checkpoint(state.directory, _checkpoint(2))

    assert read_checkpoint(state.directory) == _checkpoint(1)
    _assert_no_temporary_files(state.directory)


def test_progress_file_on_a_full_disk_keeps_the_previous_one(
    tmp_path: Path, tmpfs: Callable[[Path, str], Tmpfs]
) -> None:
    lake = tmpfs(tmp_path / "lake", "256k")
    tables = [f"s.t{i}" for i in range(300)]  # a progress file of a few KB
    write_progress(lake.directory, "soak", Position.of(1), tables)
    lake.fill()

    progress = lake.directory / "_replcheck" / "progress" / "soak.json"
    with pytest.raises(DiskFullError, match=_writing(progress)):
        write_progress(lake.directory, "soak", Position.of(2), tables)

    assert read_progress(lake.directory)["soak"][0] == Position.of(1)
    _assert_no_temporary_files(lake.directory)


def test_spill_segment_on_a_full_disk_is_named_and_removed(
    tmp_path: Path, tmpfs: Callable[[Path, str], Tmpfs]
) -> None:
    state = tmpfs(tmp_path / "state", "256k")
    spill = TransactionSpill(state.directory, "tx-1")
    state.fill()

    segment = re.escape(f"no space left on device writing {state.directory}/") + r"\w+\.seg: "
    with pytest.raises(DiskFullError, match=segment):
        spill.append([(seq, bytes(4000)) for seq in range(10)])

    assert list(state.directory.glob("*.seg")) == []  # a checkpoint refers to none of it


def test_image_store_on_a_full_disk_keeps_its_last_flush(
    tmp_path: Path, tmpfs: Callable[[Path, str], Tmpfs]
) -> None:
    state = tmpfs(tmp_path / "state", "512k")
    images = state.directory / "images"
    with pytest.raises(DiskFullError, match=_writing(images / "data.mdb")):  # noqa: SIM117
        with RowImageStore(images) as store:  # its exit must not hide the error
            store.put("t", (1,), Position.of(1), {"id": 1, "v": "flushed"}, 0)
            store.flush()
            state.fill()
            for key in range(2000):
                store.put("t", (key,), Position.of(2), {"id": key, "v": "x" * 200}, 0)
            store.flush()

    state.empty()
    with RowImageStore(images) as store:
        assert store.get("t", (1,)) == {"id": 1, "v": "flushed"}
        assert store.get("t", (2,)) is None


# -- recognising a full disk --------------------------------------------------------------


class PanicException(BaseException):
    """Stands for pyo3's ``PanicException`` (recognised by name, as it is not importable)."""


@pytest.mark.parametrize(
    "exc",
    [
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        OSError("Generic LocalFileSystem error\n ↳ No space left on device (os error 28)\n"),
        RuntimeError("Failed to parse parquet: External: ... (os error 28)"),
    ],
    ids=["errno", "delta-rs-oserror", "delta-rs-text"],
)
def test_full_disk_is_recognised_by_errno_or_text(exc: BaseException) -> None:
    assert is_disk_full(exc)


def test_full_disk_is_recognised_in_the_exception_raised_from() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise ValueError("wrapped") from inner
    except ValueError as outer:
        assert is_disk_full(outer)


def test_io_error_or_panic_is_a_full_disk_only_where_the_disk_is_full(
    tmp_path: Path, tmpfs: Callable[[Path, str], Tmpfs]
) -> None:
    disk = tmpfs(tmp_path / "disk", "4m")  # more free than NEARLY_FULL_BYTES until filled
    failures = [Exception("mdb_txn_commit: Input/output error"), PanicException("Already shut")]

    assert not any(is_disk_full(failure, disk.directory) for failure in failures)
    disk.fill()
    assert all(is_disk_full(failure, disk.directory) for failure in failures)
    assert not any(is_disk_full(failure) for failure in failures)  # where: not known


@pytest.mark.parametrize(
    "exc",
    [OSError(errno.EACCES, "Permission denied"), ValueError("no space here"), KeyboardInterrupt()],
)
def test_other_failures_are_not_a_full_disk(exc: BaseException) -> None:
    assert not is_disk_full(exc)
