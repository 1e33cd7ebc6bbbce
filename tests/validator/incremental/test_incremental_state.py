"""The stored validation state: a round trip, and a clear error naming a corrupt file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from cdc_core.lake.layout import LakeTable
from connectors.pushdown import RangeLeaves
from merkle.tree import LeafDigest
from validator.incremental.changed_leaves import leaf_of
from validator.incremental.state import (
    METADATA,
    CorruptState,
    LogMark,
    ValidationState,
    legacy_path,
    read_state,
    state_path,
    to_head,
    write_state,
)
from validator.incremental.stored_digests import StoredDigests

STATE = ValidationState(
    fingerprint={"columns": "[('id', 'IntegerType()')]"},
    scheme=RangeLeaves(2, 125, 4),
    low=100,
    high=120,
    position_text="100..120 (2 partitions)",
    changelog=LogMark("a-table-id", 7),
    mirror=None,
    sweep_cursor=4,
    source=StoredDigests.of({0: LeafDigest(3, 2**64 - 1), 9: LeafDigest(1, 5)}, 16),
    lake=StoredDigests.of({0: LeafDigest(3, 2**64 - 1)}, 16),
)


def test_a_state_reads_back_as_written_and_knows_its_differing_leaves(tmp_path: Path) -> None:
    path = state_path(LakeTable(tmp_path, "shop.orders"), "orders/nightly")
    assert path.parent == tmp_path / "_replcheck" / "validation" / "shop" / "orders"
    legacy_path(path).parent.mkdir(parents=True)
    legacy_path(path).write_text("{}", encoding="utf-8")  # a state of format 1 or 2
    write_state(path, STATE)
    assert read_state(path) == STATE
    assert STATE.differing_leaves() == {9}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary, no legacy


def _written(tmp_path: Path) -> Path:
    path = tmp_path / "orders.arrow"
    write_state(path, STATE)
    return path


def test_a_state_whose_digests_were_altered_is_refused(tmp_path: Path) -> None:
    path = _written(tmp_path)
    data = bytearray(path.read_bytes())
    at = data.index((2**64 - 1).to_bytes(8, "little"))  # leaf 0's hash sum, source side
    data[at] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptState, match="do not match their CRC-32"):
        read_state(path)


def test_a_truncated_state_is_refused(tmp_path: Path) -> None:
    path = _written(tmp_path)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(CorruptState, match="is not a validation state"):
        read_state(path)


def test_a_state_of_another_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "orders.arrow"
    head = {**to_head(STATE, 0), "format_version": 3}
    table = pa.table({"x": [1]}).replace_schema_metadata({METADATA: json.dumps(head)})
    with pa.OSFile(str(path), "wb") as file, pa.ipc.new_file(file, table.schema) as out:
        out.write_table(table)
    with pytest.raises(CorruptState, match="is of format version 3, not 4"):
        read_state(path)


@pytest.mark.parametrize(
    "text", ["", "[]", '{"format": "replcheck.validation-state", "format_version": 2}']
)
def test_a_corrupt_state_is_an_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "orders.arrow"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorruptState, match="is not a validation state") as raised:
        read_state(path)
    assert raised.value.path == path


def test_digests_merge_and_compare_as_columns() -> None:
    stored = StoredDigests.of(
        {1: LeafDigest(2, 10), 4: LeafDigest(1, 2**64 - 1), 7: LeafDigest(5, 0)}, 10
    )
    fresh = {4: LeafDigest(2, 3), 9: LeafDigest(1, 1)}  # 7 re-hashed and now empty
    merged = stored.replaced({4, 7, 9}, fresh)
    assert merged.to_dict() == {1: LeafDigest(2, 10), 4: LeafDigest(2, 3), 9: LeafDigest(1, 1)}
    assert merged.rows() == 5
    assert merged.differing(stored) == {4, 7, 9}
    assert merged.differing(merged.replaced({4}, {4: LeafDigest(2, 4)})) == {4}
    assert merged.replaced((), {}) == merged


def test_digest_columns_of_different_lengths_or_leaves_are_refused() -> None:
    with pytest.raises(ValueError, match="different lengths"):
        StoredDigests(pa.array([1, 2], pa.int64()), pa.array([1], pa.uint64()))
    with pytest.raises(ValueError, match="digests of 2 and 3 leaves"):
        StoredDigests.of({}, 2).differing(StoredDigests.of({}, 3))


def test_a_state_whose_columns_are_sliced_writes_as_it_reads(tmp_path: Path) -> None:
    sliced = StoredDigests.of({1: LeafDigest(2, 10), 16: LeafDigest(1, 7)}, 17)
    offset = StoredDigests(sliced.count.slice(1), sliced.hash_sum.slice(1))  # an offset
    state = replace(STATE, source=offset, lake=offset)
    path = tmp_path / "orders.arrow"
    write_state(path, state)
    stored = read_state(path)
    assert stored is not None and stored.source.to_dict() == {
        0: LeafDigest(2, 10),
        15: LeafDigest(1, 7),
    }


def test_no_state_file_is_no_state(tmp_path: Path) -> None:
    assert read_state(tmp_path / "absent.arrow") is None


def test_keys_fall_into_leaves_as_the_sql_puts_them() -> None:
    scheme = RangeLeaves(2, 125, 4)
    assert [leaf_of(k, scheme) for k in (None, -5, 2, 126, 127, 1503, 2000, 10**9)] == [
        0,
        0,
        0,
        0,
        1,
        12,
        15,
        15,
    ]


def test_at_most_so_many_ranges_cover_the_leaves_keeping_the_widest_gaps() -> None:
    from validator.incremental.rehash import covering_runs

    runs = [(0, 1), (3, 4), (10, 12), (13, 14), (40, 41)]
    assert covering_runs(runs, 10) == runs
    assert covering_runs(runs, 3) == [(0, 4), (10, 14), (40, 41)]
    assert covering_runs(runs, 1) == [(0, 41)]
