"""The row image store: versions by position, tombstones, truncates, retention, durability."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import lmdb
import pytest

from cdc_core.capture.events import ABSENT, UNAVAILABLE
from cdc_core.capture.position import Position
from cdc_core.errors import ContractError, TerminalError
from cdc_core.rebuild.image_store import (
    BelowRetentionError,
    RowImageStore,
    from_image_bytes,
    to_image_bytes,
    to_locator_bytes,
)

P = Position.of


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RowImageStore]:
    with RowImageStore(tmp_path / "images.db") as opened:
        yield opened


def test_get_finds_the_latest_version_at_or_before_a_position(store: RowImageStore) -> None:
    store.put("s.t", (1,), P(10), {"v": "a"}, 0)
    store.put("s.t", (1,), P(20), {"v": "b"}, 0)
    store.put("s.t", (1,), P(20), {"v": "c"}, 1)
    assert store.get("s.t", (1,)) == {"v": "c"}
    assert store.get("s.t", (1,), P(9)) is None
    assert store.get("s.t", (1,), P(10)) == {"v": "a"}
    assert store.get("s.t", (1,), P(19)) == {"v": "a"}
    assert store.get("s.t", (1,), P(20)) == {"v": "c"}
    assert store.get("s.t", (1,), P(20), seq=0) == {"v": "b"}
    assert store.get("s.t", (1,), P(20), seq=-1) == {"v": "a"}


def test_tables_and_locators_do_not_mix(store: RowImageStore) -> None:
    store.put("s.t", (1,), P(1), {"v": 1}, 0)
    store.put("s.u", (1,), P(1), {"v": 2}, 0)
    store.put("s.t", "AAAB", P(1), {"v": 3}, 0)
    assert store.get("s.t", (1,)) == {"v": 1}
    assert store.get("s.u", (1,)) == {"v": 2}
    assert store.get("s.t", "AAAB") == {"v": 3}
    assert store.get("s.t", (2,)) is None
    assert store.get("s.t", ("AAAB",)) is None


def test_a_locator_longer_than_an_lmdb_key_is_stored_by_its_digest(store: RowImageStore) -> None:
    """A table without a key is located by all its values, a long text among them."""
    long, other = (1, "x" * 5000, 0), (1, "x" * 4999 + "y", 0)
    store.put("s.t", long, P(1), {"v": "long"}, 0)
    store.put("s.t", other, P(1), {"v": "other"}, 0)
    store.put("s.t", long, P(2), None, 0)
    assert store.get("s.t", long, P(1)) == {"v": "long"}
    assert store.get("s.t", long) is None  # the tombstone at P(2)
    assert store.get("s.t", other) == {"v": "other"}


def test_writing_a_version_again_replaces_it(store: RowImageStore) -> None:
    store.put("s.t", (1,), P(5), {"v": "old"}, 3)
    store.put("s.t", (1,), P(5), {"v": "new"}, 3)
    assert store.get("s.t", (1,)) == {"v": "new"}


def test_a_tombstone_hides_the_row_until_it_is_inserted_again(store: RowImageStore) -> None:
    store.put("s.t", (1,), P(1), {"v": 1}, 0)
    store.put("s.t", (1,), P(2), None, 0)
    store.put("s.t", (1,), P(3), {"v": 3}, 0)
    assert [store.get("s.t", (1,), P(n)) for n in (1, 2, 3)] == [{"v": 1}, None, {"v": 3}]


def test_a_truncate_hides_older_versions_of_its_table_only(store: RowImageStore) -> None:
    store.put("s.t", (1,), P(1), {"v": 1}, 0)
    store.put("s.u", (1,), P(1), {"v": 1}, 0)
    store.truncate("s.t", P(2), 1)
    store.truncate("s.t", P(2), 1)  # a re-read truncate is recorded once
    store.put("s.t", (2,), P(2), {"v": 2}, 2)
    assert store.get("s.t", (1,), P(2), seq=0) == {"v": 1}
    assert store.get("s.t", (1,), P(2), seq=1) is None
    assert store.get("s.t", (1,)) is None
    assert store.get("s.t", (2,)) == {"v": 2}
    assert store.get("s.u", (1,)) == {"v": 1}


def test_retention_keeps_the_newest_version_below_the_cut(tmp_path: Path) -> None:
    path = tmp_path / "images.db"
    with RowImageStore(path) as store:
        for n in range(1, 6):
            store.put("s.t", (1,), P(n * 10), {"v": n}, 0)
        store.put("s.t", (2,), P(10), {"v": 0}, 0)
        store.put("s.t", (2,), P(20), None, 0)  # deleted before the cut: nothing to keep
        store.put("s.u", (1,), P(10), {"v": 0}, 0)
        store.truncate("s.u", P(20), 0)  # truncated before the cut: nothing to keep
        store.retain_from(P(35))
        assert store.retention_position == P(35)
        assert store.get("s.t", (1,), P(35)) == {"v": 3}
        assert store.get("s.t", (1,), P(40)) == {"v": 4}
        assert store.get("s.t", (2,), P(35)) is None
        assert store.get("s.u", (1,), P(35)) is None
        with pytest.raises(BelowRetentionError, match="before position 34"):
            store.get("s.t", (1,), P(34))
        assert store.version_count() == 3  # (1,) at 30, 40 and 50
    with RowImageStore(path) as reopened:
        assert reopened.version_count() == 3
        assert reopened.retention_position == P(35)
        with pytest.raises(BelowRetentionError):
            reopened.get("s.t", (1,), P(20))


def test_writes_survive_a_reopen_after_flush(tmp_path: Path) -> None:
    path = tmp_path / "images.db"
    with RowImageStore(path) as store:
        store.put("s.t", (1,), P(1), {"v": Decimal("1.50")}, 0)
        store.truncate("s.u", P(1), 1)
    with RowImageStore(path) as store:
        assert store.get("s.t", (1,)) == {"v": Decimal("1.50")}
        store.put("s.u", (1,), P(0), {"v": 0}, 0)
        assert store.get("s.u", (1,)) is None  # the truncate marker came back too


def test_a_crash_between_flushes_leaves_the_state_of_the_last_flush(tmp_path: Path) -> None:
    path = tmp_path / "images.db"
    script = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        from cdc_core.rebuild.image_store import RowImageStore
        from cdc_core.capture.position import Position
        store = RowImageStore(Path({str(path)!r}))
        store.put("s.t", (1,), Position.of(1), {{"v": "flushed"}}, 0)
        store.flush()
        for n in range(20000):  # enough that LMDB spills dirty pages to the data file
            store.put("s.t", (n,), Position.of(2), {{"v": "x" * 100}}, 0)
        store.truncate("s.t", Position.of(3), 0)
        os._exit(0)  # no flush, no close: like a kill -9
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=Path(__file__).parents[3])
    with RowImageStore(path) as store:
        assert store.get("s.t", (1,)) == {"v": "flushed"}
        assert store.get("s.t", (2,)) is None
        assert store.version_count() == 1


def test_put_refuses_partial_images_and_negative_seq(store: RowImageStore) -> None:
    with pytest.raises(ContractError, match="ABSENT"):
        store.put("s.t", (1,), P(1), {"v": ABSENT}, 0)
    with pytest.raises(ContractError, match="UNAVAILABLE"):
        store.put("s.t", (1,), P(1), {"v": UNAVAILABLE}, 0)
    with pytest.raises(ContractError, match="seq"):
        store.put("s.t", (1,), P(1), {"v": 1}, -1)


def test_a_store_of_another_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "images.db"
    RowImageStore(path).close()
    with lmdb.open(str(path), max_dbs=3) as env, env.begin(write=True) as txn:
        txn.put(b"format_version", (99).to_bytes(8, "big"), db=env.open_db(b"meta", txn=txn))
    with pytest.raises(TerminalError, match="format 99"):
        RowImageStore(path)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ((1,), (1.0,)),
        ((1,), (Decimal("1.00"),)),
        ((Decimal("0.1"),), (Decimal("0.10"),)),
        ((0.5,), (Decimal("0.5"),)),
        ((2**70, "x"), (2**70, "x")),
    ],
)
def test_locators_equal_in_python_have_equal_keys(left: tuple[object], right: object) -> None:
    assert left == right
    assert to_locator_bytes(left) == to_locator_bytes(right)


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("a|b", "c"), ("a", "b|c")),
        (("ab",), ("a", "b")),
        (("1",), (1,)),
        ((True,), (1,)),
        ((None,), ("",)),
        (("x",), "x"),
        ((b"x",), ("x",)),
        ((1, 2), (12,)),
        ((date(2026, 1, 1),), (datetime(2026, 1, 1),)),
    ],
)
def test_different_locators_have_different_keys(left: object, right: object) -> None:
    assert to_locator_bytes(left) != to_locator_bytes(right)


@pytest.mark.parametrize("locator", [[1], 1, ({1},)])
def test_unsupported_locators_are_refused(locator: object) -> None:
    with pytest.raises(ContractError, match="locator"):
        to_locator_bytes(locator)


def test_nan_and_infinities_locate_rows_as_the_databases_compare_them() -> None:
    """A table without a key is located by all its values: NaN equals NaN there (as
    PostgreSQL compares it), and the infinities are two values of their own (found by the
    generative tester, postgres-default seed 4009)."""
    nan, inf = float("nan"), float("inf")
    assert to_locator_bytes((nan, 1)) == to_locator_bytes((float("nan"), 1))
    assert to_locator_bytes((Decimal("NaN"),)) == to_locator_bytes((nan,))
    assert to_locator_bytes((Decimal("-Infinity"),)) == to_locator_bytes((-inf,))
    found = {to_locator_bytes((value,)) for value in (nan, inf, -inf, 0.0, "nan", "inf")}
    assert len(found) == 6


def test_image_bytes_round_trip_every_kind_of_value() -> None:
    image: dict[str, object] = {
        "none": None,
        "bool": True,
        "big": -(2**80),
        "float": -0.0,
        "text": "é\ud800",
        "bytes": b"\x00",
        "decimal": Decimal("-0.00"),
        "naive": datetime(2021, 11, 7, 1, 30, fold=1),
        "utc": datetime(2026, 1, 2, 3, 4, 5, 6, UTC),
        "offset": datetime(2026, 1, 2, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        "zoned": datetime(2026, 7, 1, tzinfo=ZoneInfo("Europe/Berlin")),
        "date": date(1, 1, 1),
        "time": time(23, 59, 59, 999999),
        "interval": timedelta(days=-1, microseconds=1),
        "uuid": uuid.UUID(int=7),
        "json": {"a": [1, 2]},
    }
    back = from_image_bytes(to_image_bytes(image))
    assert back == image
    assert {k: (type(v), repr(v)) for k, v in back.items()} == {
        k: (type(v), repr(v)) for k, v in image.items()
    }
    assert back["naive"].fold == 1  # type: ignore[attr-defined]
