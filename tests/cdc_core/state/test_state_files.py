"""State files are data (issue 19, item 6): nothing in the state directory runs code.

Every state file (checkpoint, buffer state, spill record, row image) is planted with a
pickle whose reduce runs ``touch <marker>``: each is refused naming the class it asked for,
and the marker never appears. Files of the pickled format 1 are read once by the migration
(the restricted unpickler) and give exactly what was stored; a corrupt file is an error
naming it and the fix, distinct from a refused pickle.
"""

from __future__ import annotations

import dataclasses
import json
import marshal
import os
import pickle
import subprocess
import sys
import uuid
import zlib
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import lmdb
import pytest

from cdc_core.buffer.buffer_state import BufferState, TransactionState
from cdc_core.buffer.spill import SegmentRef, SpillCorruptError, TransactionSpill
from cdc_core.capture.events import ABSENT, Interval, RowChange
from cdc_core.capture.position import Position
from cdc_core.ddl.table_refresh import RefreshState
from cdc_core.errors import TerminalError
from cdc_core.lake.layout import (
    progress_dir,
    read_marks,
    read_marks_of,
    read_progress,
    write_progress,
)
from cdc_core.pipeline.checkpoint import (
    Checkpoint,
    CheckpointCorruptError,
    read_checkpoint,
    write_checkpoint,
)
from cdc_core.rebuild.image_store import ImageStoreCorruptError, RowImageStore, from_image_bytes
from cdc_core.state.directory import StateDirectory
from cdc_core.state.document import ForbiddenPickleError, StateFileCorruptError, read_json_file
from tests.cdc_core.kill_loop import ROOT, write_config

T0 = datetime(2026, 5, 1, 8, 30, tzinfo=UTC)
DATA = Path(__file__).parents[1] / "data"


class _Planted:
    """Pickles as a call of ``os.system``: what an attacker would write into a state file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


@pytest.fixture
def marker() -> Iterator[Path]:
    path = Path(f"/tmp/pwned-{uuid.uuid4().hex}")
    yield path
    assert not path.exists(), "a planted pickle ran"


def _planted(marker: Path) -> bytes:
    return pickle.dumps(_Planted(marker), pickle.HIGHEST_PROTOCOL)


def _version_1(magic: bytes, payload: bytes) -> bytes:
    """A file as format 1 framed it: magic, CRC-32 of the pickle, the pickle."""
    return magic + zlib.crc32(payload).to_bytes(4, "little") + payload


def _checkpoint() -> Checkpoint:
    """What ``data/checkpoint-v1.bin`` holds (written by the release before, commit dab46c6)."""
    segment = SegmentRef("0123456789abcdef0123456789abcdef.seg", 2, 120)
    txn = TransactionState(
        "tx-1", Position(5, "bin.1:5"), T0, 3, 1, (segment,), frozenset({0}), frozenset({"age"})
    )
    buffer = BufferState(Position(9, "bin.1:9"), 2, (txn,), ("old.seg",))
    refresh = RefreshState(
        "s.t",
        Position(7, "bin.1:7"),
        False,
        (Decimal("1.50"), "k\udc80", datetime(2026, 1, 1, tzinfo=ZoneInfo("Europe/Berlin"))),
        40,
        "ALTER TABLE",
        False,
        ((date(2024, 2, 29), b"\x00", Interval(1, 2, 3)),),
    )
    return Checkpoint(
        "shop",
        Position(8, "bin.1:8"),
        Position(4, "bin.1:4"),
        buffer,
        {"s.t": Position(1, "bin.1:1")},
        {"s.u": Position(2, "bin.1:2")},
        (refresh,),
        {"s.t": Position(6, "bin.1:6")},
        {"s.t": ((6, 8),)},
        {"s.t": "id int"},
    )


# -- planted pickles -----------------------------------------------------------------------


def test_a_planted_checkpoint_pickle_is_refused_naming_the_class(
    tmp_path: Path, marker: Path
) -> None:
    StateDirectory(tmp_path).checkpoint.write_bytes(_version_1(b"RCCKPT01", _planted(marker)))
    with pytest.raises(ForbiddenPickleError, match=r"asks for posix\.system") as caught:
        read_checkpoint(tmp_path)
    assert str(StateDirectory(tmp_path).checkpoint) in str(caught.value)


def test_a_bare_pickle_as_checkpoint_is_corrupt_not_loaded(tmp_path: Path, marker: Path) -> None:
    StateDirectory(tmp_path).checkpoint.write_bytes(_planted(marker))
    with pytest.raises(CheckpointCorruptError, match="restore it from a backup"):
        read_checkpoint(tmp_path)


def test_a_planted_buffer_state_pickle_is_refused(marker: Path) -> None:
    with pytest.raises(ForbiddenPickleError, match=r"posix\.system"):
        BufferState.from_bytes(_version_1(b"RCBUFST1", _planted(marker)))


def test_a_planted_spill_record_is_refused_naming_the_segment(tmp_path: Path, marker: Path) -> None:
    spill = TransactionSpill(tmp_path, "tx-1")
    spill.append([(0, _planted(marker))])  # framed and checksummed like any record
    spill.seal()
    with pytest.raises(ForbiddenPickleError, match=r"posix\.system") as caught:
        list(spill.iter_changes(()))
    assert str(tmp_path / spill.segments[0].name) in str(caught.value)


def test_a_marshalled_code_object_in_a_spill_record_is_refused(tmp_path: Path) -> None:
    spill = TransactionSpill(tmp_path, "tx-1")
    code = compile("import os", "<planted>", "exec")
    spill.append([(0, marshal.dumps((1, "1", "c", "s.t", (1,), ({"a": code}, None), None, None)))])
    with pytest.raises(SpillCorruptError, match=r"is not a stored change.*holds a code"):
        list(spill.iter_changes(()))


def _replace_values(path: Path, value: bytes) -> None:
    with lmdb.open(str(path), max_dbs=3) as env, env.begin(write=True) as txn:
        versions = env.open_db(b"versions", txn=txn)
        for key in list(txn.cursor(versions).iternext(values=False)):
            txn.put(key, value, db=versions)


def test_a_planted_row_image_pickle_is_refused_naming_the_store(
    tmp_path: Path, marker: Path
) -> None:
    path = tmp_path / "images"
    with RowImageStore(path) as store:
        store.put("s.t", (1,), Position.of(1), {"a": 1}, 0)
        store.flush()
    # Format 1's way of storing a rare value: kind 4, a pickle.
    _replace_values(path, b"\x01" + marshal.dumps(({"a": _planted(marker)}, {"a": 4})))
    with (
        RowImageStore(path) as store,
        pytest.raises(ForbiddenPickleError, match=rf"{path}.*posix\.system"),
    ):
        store.get("s.t", (1,), Position.of(1))


def test_a_corrupt_row_image_is_an_error_naming_the_store_and_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "images"
    with RowImageStore(path) as store:
        store.put("s.t", (1,), Position.of(1), {"a": 1}, 0)
        store.flush()
    _replace_values(path, b"\x01" + marshal.dumps(({"a": 1}, {"a": 0}))[:-3])
    with RowImageStore(path) as store, pytest.raises(TerminalError, match="re-snapshot"):
        store.get("s.t", (1,), Position.of(1))


@pytest.mark.integration
def test_cdc_run_refuses_a_planted_checkpoint_and_exits_2(tmp_path: Path, marker: Path) -> None:
    config = write_config(tmp_path, "synthetic:///?seed=3&transactions=20&tables=1")
    (tmp_path / "state").mkdir()
    (StateDirectory(tmp_path / "state").checkpoint).write_bytes(
        _version_1(b"RCCKPT01", _planted(marker))
    )
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    process = subprocess.run(
        [*command, "--pipeline", "soak", "--until-caught-up"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 2, process.stderr
    assert "asks for posix.system" in process.stderr


def _cdc_run(config: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    return subprocess.run(
        [*command, "--pipeline", "soak", "--until-caught-up"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.integration
def test_cdc_run_refuses_a_truncated_row_image_store_naming_it(tmp_path: Path) -> None:
    """Issue 37, item 3: a cut-short LMDB file was mapped and read: SIGBUS, rc -7."""
    config = write_config(tmp_path, "synthetic:///?seed=5&transactions=200&tables=2")
    assert _cdc_run(config).returncode == 0
    data = tmp_path / "state" / "images" / "data.mdb"
    os.truncate(data, 3 * 4096)  # the meta pages and one more: the last commit is past it
    process = _cdc_run(config)
    assert process.returncode == 2, (process.returncode, process.stderr)
    assert str(data) in process.stderr and "cut short" in process.stderr
    assert "synthetic.t0" in process.stderr and "snapshot" in process.stderr


@pytest.mark.parametrize("keep", [0, 100, 4096 * 3])
def test_a_truncated_row_image_store_is_refused_before_it_is_mapped(
    tmp_path: Path, keep: int
) -> None:
    path = tmp_path / "images"
    with RowImageStore(path) as store:
        for key in range(2000):
            store.put("s.t", (key,), Position.of(1), {"a": "x" * 200}, 0)
    os.truncate(path / "data.mdb", keep)
    with pytest.raises(ImageStoreCorruptError, match=rf"{path / 'data.mdb'}.*cut short"):
        RowImageStore(path)


@pytest.mark.integration
def test_cdc_run_refuses_a_truncated_progress_file_naming_it_and_the_fix(tmp_path: Path) -> None:
    """Issue 37, item 5: a cut-short progress file was a JSONDecodeError, "a replcheck bug";
    deleted as the message says, the next run writes it again."""
    config = write_config(tmp_path, "synthetic:///?seed=6&transactions=50&tables=1")
    assert _cdc_run(config).returncode == 0
    progress = tmp_path / "lake" / "_replcheck" / "progress" / "soak.json"
    progress.write_bytes(progress.read_bytes()[:20])
    process = _cdc_run(config)
    assert process.returncode == 2, (process.returncode, process.stderr)
    assert str(progress) in process.stderr and "delete it" in process.stderr
    assert "replcheck bug" not in process.stderr
    progress.unlink()
    assert _cdc_run(config).returncode == 0
    assert json.loads(progress.read_text(encoding="utf-8"))["tables"] == ["synthetic.t0"]


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b'{"pipeline": "soak", "posi', "not a complete JSON document"),
        (b"\xff\xfe", "not a complete JSON document"),
        (b"[" * 100_000, "not a complete JSON document"),
        (b"[1, 2]", "not a JSON object"),
    ],
)
def test_the_checked_reader_names_the_file_and_the_fix(
    tmp_path: Path, content: bytes, what: str
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with pytest.raises(StateFileCorruptError, match=rf"{path} is corrupt.*{what}.*; remove it"):
        read_json_file(path, "remove it")
    path.write_text('{"a": [1]}', encoding="utf-8")
    assert read_json_file(path, "remove it") == {"a": [1]}


@pytest.mark.parametrize("content", ['{"pipeline": "soak", "posi', '{"pipeline": "soak"}'])
def test_a_corrupt_progress_file_names_itself_wherever_it_is_read(
    tmp_path: Path, content: str
) -> None:
    write_progress(tmp_path, "soak", Position.of(5), ["s.t"])
    assert read_progress(tmp_path)["soak"] == (Position.of(5), frozenset({"s.t"}))
    path = progress_dir(tmp_path) / "soak.json"
    path.write_text(content, encoding="utf-8")
    for read in (read_progress, read_marks, lambda lake: read_marks_of(lake, "soak")):
        with pytest.raises(StateFileCorruptError, match=rf"{path} is corrupt.*delete it"):
            read(tmp_path)


# -- the new format and the migration ----------------------------------------------------


def test_a_checkpoint_is_a_checksummed_json_document_that_round_trips(tmp_path: Path) -> None:
    checkpoint = _checkpoint()
    write_checkpoint(tmp_path, checkpoint)
    document = json.loads((StateDirectory(tmp_path).checkpoint).read_text(encoding="utf-8"))
    assert (document["format"], document["version"]) == ("replcheck.checkpoint", 2)
    assert document["checksum"].startswith("sha256:")
    assert read_checkpoint(tmp_path) == checkpoint


def test_the_keys_the_lake_is_keyed_by_round_trip_and_default_to_none(tmp_path: Path) -> None:
    """Checkpoints written before the keys were recorded read with no keys: the pipeline
    then compares a DDL's new key with the description it holds, as before."""
    checkpoint = dataclasses.replace(_checkpoint(), keys={"s.t": ("id",), "s.k": ("a", "_copy")})
    write_checkpoint(tmp_path, checkpoint)
    assert read_checkpoint(tmp_path) == checkpoint
    body = checkpoint.to_dict()
    del body["keys"]
    assert Checkpoint.from_dict(body).keys == {}


def test_an_edited_checkpoint_fails_its_checksum_naming_the_file(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, _checkpoint())
    path = StateDirectory(tmp_path).checkpoint
    path.write_text(path.read_text(encoding="utf-8").replace('"shop"', '"shoq"'), "utf-8")
    with pytest.raises(CheckpointCorruptError, match=f"{path} is corrupt.*checksum"):
        read_checkpoint(tmp_path)


def test_a_pickled_checkpoint_is_migrated_once_and_rewritten(tmp_path: Path) -> None:
    StateDirectory(tmp_path).checkpoint.write_bytes((DATA / "checkpoint-v1.bin").read_bytes())

    assert read_checkpoint(tmp_path) == _checkpoint()
    assert (StateDirectory(tmp_path).checkpoint).read_bytes().startswith(b"{")
    assert read_checkpoint(tmp_path) == _checkpoint()


def test_a_planted_getattr_reaching_past_zoneinfo_is_refused(marker: Path) -> None:
    # getattr(Position, "to_dict") leads to __globals__ and so to the modules it imports.
    class Reach:
        def __reduce__(self) -> tuple[object, tuple[object, str]]:
            return getattr, (Position, "to_dict")

    payload = pickle.dumps(Reach(), pickle.HIGHEST_PROTOCOL)
    with pytest.raises(ForbiddenPickleError, match=r"asks for getattr\(.*'to_dict'\)"):
        BufferState.from_bytes(_version_1(b"RCBUFST1", payload))


def test_a_pickled_buffer_state_is_read() -> None:
    state = BufferState.from_bytes((DATA / "buffer-state-v1.bin").read_bytes())
    assert state == _checkpoint().buffer


def test_pickled_spill_records_of_format_1_are_read(tmp_path: Path) -> None:
    at = datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=-3)))
    row = {"id": 1, "d": Decimal("-0.00"), "at": at, "w": ABSENT, "u": uuid.UUID(int=3)}
    change = RowChange("tx-1", Position(3, "3"), "u", "s.t", (1, "a"), row, row)
    values = (3, "3", "u", "s.t", (1, "a"), row, row, None)  # format 1's record
    spill = TransactionSpill(tmp_path, "tx-1")
    spill.append([(0, pickle.dumps(values, pickle.HIGHEST_PROTOCOL))])
    assert list(spill.iter_changes(())) == [(0, change)]


def test_format_1_row_images_are_read_and_the_store_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "images"
    with RowImageStore(path) as store:
        store.put("s.t", (1,), Position.of(1), {"a": 1}, 0)
        store.flush()
    zoned = datetime(2026, 3, 29, 2, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    stored = {"a": 1, "d": "1.5", "n": (2026, 1, 2, 3, 4, 5, 6, 0), "z": pickle.dumps(zoned)}
    _replace_values(path, b"\x01" + marshal.dumps((stored, {"d": 0, "n": 1, "z": 4})))
    with lmdb.open(str(path), max_dbs=3) as env, env.begin(write=True) as txn:
        txn.put(b"format_version", (1).to_bytes(8, "big"), db=env.open_db(b"meta", txn=txn))

    with RowImageStore(path) as store:
        image = store.get("s.t", (1,), Position.of(1))
        store.flush()
    assert image == {"a": 1, "d": Decimal("1.5"), "n": datetime(2026, 1, 2, 3, 4, 5, 6), "z": zoned}
    assert from_image_bytes(marshal.dumps(({"a": 1}, None))) == {"a": 1}
    with lmdb.open(str(path), max_dbs=3) as env, env.begin() as txn:
        version = txn.get(b"format_version", db=env.open_db(b"meta", txn=txn))
    assert int.from_bytes(version, "big") == 2
