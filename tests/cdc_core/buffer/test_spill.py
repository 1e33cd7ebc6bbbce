"""Spill segments: exact round trip, and corruption detected before any record is read."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from cdc_core.buffer.spill import (
    SegmentRef,
    SpillCorruptError,
    TransactionSpill,
    decode_change,
    encode_change,
)
from cdc_core.capture.events import ABSENT, UNAVAILABLE, RowChange
from cdc_core.capture.position import Position

ROW = {
    "id": 7,
    "name": "Zoë",
    "amount": Decimal("12.30"),
    "at": datetime(2026, 3, 1, 12, 0, 0, 123456, tzinfo=UTC),
    "blob": b"\x00\xff",
    "note": None,
    "wide": ABSENT,
    "doc": UNAVAILABLE,
}


def records(count: int) -> list[tuple[int, bytes]]:
    return [(seq, f"payload-{seq}".encode()) for seq in range(count)]


def test_a_change_round_trips_exactly() -> None:
    change = RowChange("tx-1", Position(42, "bin.000001:42"), "u", "s.t", (7,), ROW, ROW)
    decoded = decode_change("tx-1", encode_change(change))
    assert decoded == change
    assert decoded.position.text == "bin.000001:42"
    assert decoded.after is not None and decoded.after["wide"] is ABSENT
    assert decoded.after["doc"] is UNAVAILABLE  # the singleton, not a copy equal to nothing
    amount = decoded.after["amount"]
    assert isinstance(amount, Decimal) and amount.as_tuple() == Decimal("12.30").as_tuple()


def test_records_stream_back_in_order_across_segments(tmp_path: Path) -> None:
    spill = TransactionSpill(tmp_path, "tx-1", segment_max_bytes=100)
    spill.append(records(3))
    spill.append(records(10)[3:])
    spill.seal()
    assert len(spill.segments) >= 3
    assert sum(ref.record_count for ref in spill.segments) == 10
    assert list(spill.iter_records()) == records(10)
    assert spill.size_bytes == sum(p.stat().st_size for p in tmp_path.iterdir())


def sealed_spill(tmp_path: Path) -> tuple[TransactionSpill, Path]:
    spill = TransactionSpill(tmp_path, "tx-9")
    spill.append(records(5))
    spill.seal()
    return spill, tmp_path / spill.segments[0].name


def drain(spill: TransactionSpill) -> list[tuple[int, bytes]]:
    """Read a spill, recording what was yielded before any error."""
    seen: list[tuple[int, bytes]] = []
    try:
        for record in spill.iter_records():
            seen.append(record)
    finally:
        assert seen in ([], records(5)), "a corrupt spill was half-read"
    return seen


@pytest.mark.parametrize("offset", [0, 10, 30, 40, -20, -1])
def test_a_flipped_byte_is_reported_with_file_offset_and_txid(tmp_path: Path, offset: int) -> None:
    spill, path = sealed_spill(tmp_path)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(SpillCorruptError) as caught:
        drain(spill)
    message = str(caught.value)
    assert str(path) in message and "tx-9" in message and "re-snapshot" in message
    assert caught.value.context["txid"] == "tx-9"
    assert isinstance(caught.value.context["offset"], int)


@pytest.mark.parametrize("cut", [1, 5, 16, 25])
def test_a_truncated_segment_is_reported_not_half_read(tmp_path: Path, cut: int) -> None:
    spill, path = sealed_spill(tmp_path)
    path.write_bytes(path.read_bytes()[:-cut])
    with pytest.raises(SpillCorruptError, match="truncated"):
        drain(spill)


def test_truncation_is_caught_by_the_reader_itself(tmp_path: Path) -> None:
    spill, path = sealed_spill(tmp_path)
    path.write_bytes(path.read_bytes()[:-16])  # drop exactly the footer
    ref = spill.segments[0]
    honest = TransactionSpill(tmp_path, "tx-9", [SegmentRef(ref.name, 5, ref.size_bytes - 16)])
    with pytest.raises(SpillCorruptError, match="truncated"):
        drain(honest)


def test_a_missing_segment_or_another_transactions_segment_is_reported(tmp_path: Path) -> None:
    spill, path = sealed_spill(tmp_path)
    stranger = TransactionSpill(tmp_path, "tx-other", spill.segments)
    with pytest.raises(SpillCorruptError, match="another transaction"):
        drain(stranger)
    path.unlink()
    with pytest.raises(SpillCorruptError, match="cannot stat"):
        drain(spill)


def test_a_segment_with_another_record_count_is_reported(tmp_path: Path) -> None:
    spill, _ = sealed_spill(tmp_path)
    ref = spill.segments[0]
    wrong = TransactionSpill(tmp_path, "tx-9", [SegmentRef(ref.name, 4, ref.size_bytes)])
    with pytest.raises(SpillCorruptError, match="expected 4 records"):
        list(wrong.iter_records())
