"""The full-width rebuild: examples, then random logs against an in-memory source model.

The property test simulates a source with three tables (a single-column key, a composite
key, and one whose rows predate the store and are fetched through the hook), writes its
log the way a minimal-row-image product does (updates carry only the columns they set,
deletes only the key, some inserts omit a defaulted column), and runs it through the
rebuild with rewinds, retention cuts, flushes, reopens and crashes between transactions.
Every rebuilt change must equal the full-width change the model says happened.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc_core.capture.events import (
    ABSENT,
    UNAVAILABLE,
    CommittedChange,
    CommittedTransaction,
    RowChange,
)
from cdc_core.capture.position import Position
from cdc_core.errors import TerminalError, TransientError
from cdc_core.rebuild.full_width import (
    IncompleteRowError,
    RebuildConfig,
    Rebuilder,
    RowImageMissingError,
    UnavailableValueError,
)
from cdc_core.rebuild.image_store import RowImageStore

P = Position.of
TS = datetime(2026, 5, 1, tzinfo=UTC)
SECRET = "SECRET-ROW-VALUE"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RowImageStore]:
    with RowImageStore(tmp_path / "images.db") as opened:
        yield opened


def change(op: str, locator: Hashable, after: object = None, before: object = None) -> RowChange:
    return RowChange("tx", P(1), op, "s.t", locator, after, before)  # type: ignore[arg-type]


def rebuild(rebuilder: Rebuilder, row: RowChange, commit: int, seq: int = 0) -> RowChange:
    return rebuilder.rebuild(CommittedChange(seq, row), P(commit))


def test_an_update_is_completed_from_the_stored_image(store: RowImageStore) -> None:
    rebuilder = Rebuilder(store)
    rebuild(rebuilder, change("c", (1,), {"id": 1, "a": 1, "b": TS}), 10)
    partial = change("u", (1,), {"id": ABSENT, "a": 2, "b": ABSENT}, {"id": 1, "a": ABSENT})
    rebuilt = rebuild(rebuilder, partial, 20)
    assert rebuilt.after == {"id": 1, "a": 2, "b": TS}
    assert rebuilt.before == {"id": 1, "a": 1, "b": TS}
    assert store.get("s.t", (1,)) == {"id": 1, "a": 2, "b": TS}
    assert rebuild(rebuilder, partial, 20) == rebuilt  # re-reading gives the same change


def test_a_delete_gets_its_before_image_and_leaves_a_tombstone(store: RowImageStore) -> None:
    rebuilder = Rebuilder(store)
    rebuild(rebuilder, change("c", (1,), {"id": 1, "a": None}), 10)
    rebuilt = rebuild(rebuilder, change("d", (1,), before={"id": 1, "a": ABSENT}), 20)
    assert rebuilt.before == {"id": 1, "a": None}
    assert rebuilt.after is None
    assert store.get("s.t", (1,)) is None
    assert store.get("s.t", (1,), P(19)) == {"id": 1, "a": None}


def test_an_update_of_the_key_moves_the_image(store: RowImageStore) -> None:
    rebuilder = Rebuilder(store, RebuildConfig(key_columns={"s.t": ("id",)}))
    rebuild(rebuilder, change("c", (1,), {"id": 1, "a": "x"}), 10)
    rebuilt = rebuild(rebuilder, change("u", (1,), {"id": 2, "a": ABSENT}), 20)
    assert (rebuilt.locator, rebuilt.after, rebuilt.before) == (
        (2,),
        {"id": 2, "a": "x"},
        {"id": 1, "a": "x"},
    )
    assert store.get("s.t", (1,)) is None
    assert store.get("s.t", (2,)) == {"id": 2, "a": "x"}
    later = rebuild(rebuilder, change("u", (2,), {"id": ABSENT, "a": "y"}), 30)
    assert later.after == {"id": 2, "a": "y"}


def test_a_truncate_forgets_the_table_from_its_position_on(store: RowImageStore) -> None:
    rebuilder = Rebuilder(store)
    rebuild(rebuilder, change("c", (1,), {"id": 1}), 10)
    truncate = change("t", None)
    assert rebuild(rebuilder, truncate, 20) == truncate
    with pytest.raises(RowImageMissingError):
        rebuild(rebuilder, change("d", (1,)), 30)
    assert store.get("s.t", (1,), P(19)) == {"id": 1}  # earlier positions still see it
    rebuild(rebuilder, change("c", (1,), {"id": 1, "a": 2}), 40)
    assert rebuild(rebuilder, change("d", (1,)), 50).before == {"id": 1, "a": 2}


def test_an_unknown_row_is_an_error_naming_table_locator_and_position(
    store: RowImageStore,
) -> None:
    partial = change("u", ("AAAQ",), {"a": SECRET, "b": ABSENT}, {"a": ABSENT, "b": SECRET})
    with pytest.raises(RowImageMissingError) as caught:
        rebuild(Rebuilder(store), partial, 42)
    message = str(caught.value)
    assert "s.t" in message and "'AAAQ'" in message and "42" in message
    assert SECRET not in message
    assert store.get("s.t", ("AAAQ",)) is None  # nothing half-filled was stored


def test_an_unknown_row_with_a_full_before_image_needs_no_store(store: RowImageStore) -> None:
    rebuilt = rebuild(Rebuilder(store), change("d", (1,), before={"id": 1, "a": 5}), 10)
    assert rebuilt.before == {"id": 1, "a": 5}


def test_the_fetch_hook_of_the_table_completes_unknown_rows(store: RowImageStore) -> None:
    calls: list[tuple[str, Hashable]] = []

    def fetch(table: str, locator: Hashable) -> Mapping[str, object] | None:
        calls.append((table, locator))
        return {"id": 1, "a": "source", "b": "source"}

    config = RebuildConfig(fetch_missing=lambda table, locator: None)
    config = RebuildConfig(
        fetch_missing=config.fetch_missing, fetch_missing_by_table={"s.t": fetch}
    )
    rebuilt = rebuild(Rebuilder(store, config), change("u", (1,), {"id": ABSENT, "a": "new"}), 10)
    assert rebuilt.after == {"id": 1, "a": "new", "b": "source"}
    assert calls == [("s.t", (1,))]


def test_an_insert_with_absent_columns_is_filled_by_the_hook_only(store: RowImageStore) -> None:
    insert = change("c", (1,), {"id": 1, "a": "logged", "d": ABSENT})
    with pytest.raises(IncompleteRowError, match=r"omits columns \['d'\]"):
        rebuild(Rebuilder(store), insert, 10)
    hooked = Rebuilder(store, RebuildConfig(fetch_missing=lambda t, k: {"a": "x", "d": "dflt"}))
    assert rebuild(hooked, insert, 10).after == {"id": 1, "a": "logged", "d": "dflt"}


def test_a_column_nobody_has_is_an_error_not_a_half_filled_row(store: RowImageStore) -> None:
    rebuilder = Rebuilder(store)
    rebuild(rebuilder, change("c", (1,), {"id": 1}), 10)
    with pytest.raises(IncompleteRowError, match=r"lacks columns \['added'\]"):
        rebuild(rebuilder, change("u", (1,), {"id": ABSENT, "added": ABSENT}), 20)
    assert store.get("s.t", (1,)) == {"id": 1}


def test_a_transaction_is_rebuilt_in_order(store: RowImageStore) -> None:
    rows = [change("c", (1,), {"id": 1, "a": 0}), change("u", (1,), {"id": ABSENT, "a": 1})]
    txn = CommittedTransaction(
        "tx", P(1), P(5), TS, 2, [CommittedChange(i, r) for i, r in enumerate(rows)]
    )
    rebuilt = list(Rebuilder(store).iter_rebuilt(txn))
    assert [(c.seq, c.change.after) for c in rebuilt] == [
        (0, {"id": 1, "a": 0}),
        (1, {"id": 1, "a": 1}),
    ]


# -- values the log cannot render (UNAVAILABLE) ---------------------------------------------


class AsOfSource:
    """A fetch_unavailable hook over rows recorded per commit position; logs its calls."""

    def __init__(self, rows: dict[tuple[Hashable, int], dict[str, object]]) -> None:
        self.rows = rows
        self.calls: list[tuple[str, Hashable, int, tuple[str, ...]]] = []

    def __call__(
        self, table: str, locator: Hashable, position: Position, wanted: Sequence[str]
    ) -> Mapping[str, object] | None:
        self.calls.append((table, locator, position.value, tuple(wanted)))
        row = self.rows.get((locator, position.value))
        return None if row is None else {column: row[column] for column in wanted}


def unavailable_rebuilder(store: RowImageStore, source: AsOfSource) -> Rebuilder:
    return Rebuilder(store, RebuildConfig(fetch_unavailable_by_table={"s.t": source}))


def test_an_unavailable_value_is_read_as_of_the_commit_never_taken_from_the_store(
    store: RowImageStore,
) -> None:
    source = AsOfSource({("AAAR", 20): {"doc": "new text"}})
    rebuilder = unavailable_rebuilder(store, source)
    rebuild(rebuilder, change("c", "AAAR", {"id": 1, "n": 1, "doc": "old text"}), 10)
    key_only = {"id": 1, "n": ABSENT, "doc": ABSENT}
    update = change("u", "AAAR", {"id": ABSENT, "n": 2, "doc": UNAVAILABLE}, key_only)
    rebuilt = rebuild(rebuilder, update, 20, seq=3)
    assert rebuilt.after == {"id": 1, "n": 2, "doc": "new text"}
    assert rebuilt.before == {"id": 1, "n": 1, "doc": "old text"}
    assert source.calls == [("s.t", "AAAR", 20, ("doc",))]
    assert store.get("s.t", "AAAR") == {"id": 1, "n": 2, "doc": "new text"}
    later = rebuild(rebuilder, change("u", "AAAR", {"id": ABSENT, "n": 3, "doc": ABSENT}), 30)
    assert later.after == {"id": 1, "n": 3, "doc": "new text"}
    assert len(source.calls) == 1  # a column the change did not set comes from the store


def test_an_inserted_unavailable_value_is_read_too(store: RowImageStore) -> None:
    source = AsOfSource({("AAAR", 10): {"doc": "text", "id": 99}})
    insert = change("c", "AAAR", {"id": 1, "doc": UNAVAILABLE})
    rebuilt = rebuild(unavailable_rebuilder(store, source), insert, 10)
    assert rebuilt.after == {"id": 1, "doc": "text"}  # only the unavailable column is taken


def test_a_moved_row_is_read_at_its_new_locator(store: RowImageStore) -> None:
    source = AsOfSource({("AAAS", 20): {"doc": "moved"}})
    rebuilder = unavailable_rebuilder(store, source)
    rebuild(rebuilder, change("c", "AAAR", {"id": 1, "doc": "old"}), 10)
    moved = replace(change("u", "AAAR", {"id": 1, "doc": UNAVAILABLE}), new_locator="AAAS")
    assert rebuild(rebuilder, moved, 20).after == {"id": 1, "doc": "moved"}
    assert source.calls == [("s.t", "AAAS", 20, ("doc",))]


def test_an_unavailable_before_value_is_the_stored_one(store: RowImageStore) -> None:
    rebuilder = Rebuilder(store)  # no hook: nothing needs one
    rebuild(rebuilder, change("c", "AAAR", {"id": 1, "doc": "old"}), 10)
    delete = change("d", "AAAR", before={"id": 1, "doc": UNAVAILABLE})
    assert rebuild(rebuilder, delete, 20).before == {"id": 1, "doc": "old"}


def _stale_update(store: RowImageStore, rebuilder: Rebuilder) -> RowChange:
    rebuild(rebuilder, change("c", "AAAR", {"id": 1, "doc": SECRET}), 10)
    return change("u", "AAAR", {"id": ABSENT, "doc": UNAVAILABLE})


@pytest.mark.parametrize(
    ("config", "why"),
    [
        (RebuildConfig(fetch_missing=lambda table, locator: {"doc": "now"}), "no fetch_unavail"),
        (RebuildConfig(fetch_unavailable=AsOfSource({})), "not at that locator"),
        (
            RebuildConfig(fetch_unavailable=lambda t, k, p, c: {"other": 1}),
            "did not return them",
        ),
    ],
)
def test_an_unavailable_value_nobody_can_read_stops_the_rebuild(
    store: RowImageStore, config: RebuildConfig, why: str
) -> None:
    rebuilder = Rebuilder(store, config)
    update = _stale_update(store, rebuilder)
    with pytest.raises(UnavailableValueError) as caught:
        rebuild(rebuilder, update, 42)
    message = str(caught.value)
    for part in ("['doc']", "s.t", "'AAAR'", "position 42", why, "ignore_columns"):
        assert part in message
    assert SECRET not in message
    assert caught.value.context["columns"] == ["doc"]
    assert store.get("s.t", "AAAR") == {"id": 1, "doc": SECRET}  # nothing stale was stored


def test_a_source_that_lost_the_point_stops_it_and_a_transient_failure_is_retried(
    store: RowImageStore,
) -> None:
    def too_old(table: str, locator: Hashable, position: Position, wanted: Sequence[str]) -> None:
        raise TerminalError("ORA-01555: snapshot too old; raise UNDO_RETENTION")

    rebuilder = Rebuilder(store, RebuildConfig(fetch_unavailable=too_old))
    update = _stale_update(store, rebuilder)
    with pytest.raises(UnavailableValueError, match="ORA-01555") as caught:
        rebuild(rebuilder, update, 42)
    assert isinstance(caught.value.__cause__, TerminalError)

    def flaky(table: str, locator: Hashable, position: Position, wanted: Sequence[str]) -> None:
        raise TransientError("connection reset")

    with pytest.raises(TransientError, match="connection reset"):
        rebuild(Rebuilder(store, RebuildConfig(fetch_unavailable=flaky)), update, 42)


# -- random logs against a model of the source ---------------------------------------------

KEYS: dict[str, tuple[str, ...]] = {"s.one": ("id",), "s.two": ("x", "y"), "s.old": ("id",)}
DOMAIN: dict[str, list[tuple[object, ...]]] = {
    "s.one": [(i,) for i in range(4)],
    "s.two": [(x, y) for x in (0, 1) for y in ("a", "é")],
    "s.old": [(i,) for i in range(4)],
}
DEFAULT = "default"
VALUES = st.sampled_from([None, 0, 7, 2**70, "é", Decimal("1.50"), TS, b"\x00"])
# Rows of s.old that predate the store: only the fetch hook knows them.
INITIAL = {(i,): {"id": i, "a": i, "b": "old", "note": DEFAULT} for i in range(3)}
Source = dict[str, dict[Hashable, dict[str, object]]]
Draw = Callable[[st.SearchStrategy[Any]], Any]  # DataObject.draw


def fetch_old(table: str, locator: Hashable) -> Mapping[str, object]:
    """The hook of s.old: initial rows, else a row whose only right column is the default."""
    assert table == "s.old"
    return INITIAL.get(locator, {"a": "wrong", "b": "wrong", "note": DEFAULT})  # type: ignore[call-overload]


def columns(table: str) -> tuple[str, ...]:
    return (*KEYS[table], "a", "b", "note")


def draw_insert(draw: Draw, table: str, source: Source) -> tuple[RowChange, RowChange]:
    locator = draw(st.sampled_from([k for k in DOMAIN[table] if k not in source[table]]))
    image = dict(zip(KEYS[table], locator, strict=True))
    image |= {"a": draw(VALUES), "b": draw(VALUES), "note": DEFAULT}
    logged = dict(image)
    if table == "s.old" and draw(st.booleans()):
        logged["note"] = ABSENT  # a defaulted column the log omits
    source[table][locator] = image
    return change_of("c", table, locator, logged), change_of("c", table, locator, image)


def draw_update(draw: Draw, table: str, source: Source) -> tuple[RowChange, RowChange]:
    locator = draw(st.sampled_from(sorted(source[table], key=repr)))
    before = source[table].pop(locator)
    after = dict(before)
    chosen = draw(st.sets(st.sampled_from(["a", "b", "note"]), min_size=1))
    after |= {column: draw(VALUES) for column in chosen}
    free = [k for k in DOMAIN[table] if k not in source[table] and k != locator]
    if free and draw(st.booleans()):
        after |= dict(zip(KEYS[table], draw(st.sampled_from(free)), strict=True))
        chosen |= set(KEYS[table])
    new_locator = tuple(after[c] for c in KEYS[table])
    source[table][new_locator] = after
    if draw(st.booleans()):  # a full row image
        logged = change_of("u", table, locator, after, before)
    else:
        key_only = {c: before[c] if c in KEYS[table] else ABSENT for c in columns(table)}
        carried = {c: after[c] if c in chosen else ABSENT for c in columns(table)}
        logged = change_of("u", table, locator, carried, draw(st.sampled_from([None, key_only])))
    return logged, change_of("u", table, new_locator, after, before)


def draw_delete(draw: Draw, table: str, source: Source) -> tuple[RowChange, RowChange]:
    locator = draw(st.sampled_from(sorted(source[table], key=repr)))
    before = source[table].pop(locator)
    key_only = {c: before[c] if c in KEYS[table] else ABSENT for c in columns(table)}
    logged_before = draw(st.sampled_from([None, key_only, before]))
    return change_of("d", table, locator, None, logged_before), change_of(
        "d", table, locator, None, before
    )


def change_of(
    op: str, table: str, locator: Hashable, after: object, before: object = None
) -> RowChange:
    return RowChange("tx", P(0), op, table, locator, after, before)  # type: ignore[arg-type]


def draw_transaction(draw: Draw, source: Source) -> list[tuple[RowChange, RowChange]]:
    """(logged change, expected full-width change) pairs of one transaction."""
    pairs = []
    for _ in range(draw(st.integers(1, 4))):
        table = draw(st.sampled_from(sorted(KEYS)))
        ops = ["c"] if len(source[table]) < len(DOMAIN[table]) else []
        ops += ["u", "u", "d"] if source[table] else []
        op = draw(st.sampled_from([*ops, "t"] if ops else ["t"]))
        if op == "t":
            source[table].clear()
            truncate = change_of("t", table, None, None)
            pairs.append((truncate, truncate))
        else:
            pairs.append(
                {"c": draw_insert, "u": draw_update, "d": draw_delete}[op](draw, table, source)
            )
    return pairs


class Harness:
    """Feeds transactions to a rebuild over a store that can be reopened or crash."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.config = RebuildConfig(key_columns=KEYS, fetch_missing_by_table={"s.old": fetch_old})
        self.store = RowImageStore(path)
        self.rebuilder = Rebuilder(self.store, self.config)

    def reopen(self, crash: bool) -> None:
        if crash:
            self.store._txn.abort()  # like kill -9: the unflushed transaction is lost
            self.store._env.close()
        else:
            self.store.close()
        self.store = RowImageStore(self.path)
        self.rebuilder = Rebuilder(self.store, self.config)


def positioned(
    pairs: list[tuple[RowChange, RowChange]], index: int
) -> list[tuple[RowChange, RowChange]]:
    """Give the changes of transaction ``index`` their log positions and txid."""
    return [
        (
            replace(a, txid=f"tx{index}", position=P(index * 10 + s)),
            replace(b, txid=f"tx{index}", position=P(index * 10 + s)),
        )
        for s, (a, b) in enumerate(pairs)
    ]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_logs_rebuild_to_the_model(data: st.DataObject) -> None:
    draw = data.draw
    source: Source = {table: {} for table in KEYS}
    source["s.old"] = {k: dict(v) for k, v in INITIAL.items()}
    log = [positioned(draw_transaction(draw, source), i) for i in range(draw(st.integers(1, 12)))]
    commit = [P(i * 10 + 9) for i in range(len(log))]
    with tempfile.TemporaryDirectory() as directory:
        harness = Harness(Path(directory) / "images.db")
        nxt = fed = floor = durable_floor = durable_fed = 0
        while nxt < len(log):
            action = draw(
                st.sampled_from(["feed"] * 6 + ["rewind", "retain", "flush", "reopen", "crash"])
            )
            if action == "feed":
                for seq, (logged, expected) in enumerate(log[nxt]):
                    rebuilt = harness.rebuilder.rebuild(CommittedChange(seq, logged), commit[nxt])
                    assert rebuilt == expected, f"transaction {nxt}, change {seq}"
                nxt += 1
                fed = max(fed, nxt)
            elif action == "rewind":
                nxt = draw(st.integers(floor, nxt))
            elif action == "retain":
                floor = draw(st.integers(floor, nxt))
                if floor < len(log):
                    harness.store.retain_from(commit[floor])
            elif action in ("flush", "reopen"):
                harness.store.flush() if action == "flush" else harness.reopen(crash=False)
                durable_fed, durable_floor = fed, floor
            else:  # a crash: the store is back at its last flush; re-read from a checkpoint
                harness.reopen(crash=True)
                floor, fed = durable_floor, durable_fed
                nxt = draw(st.integers(floor, fed))
        for table in ("s.one", "s.two"):
            stored = {k: harness.store.get(table, k) for k in DOMAIN[table]}
            assert stored == {k: source[table].get(k) for k in DOMAIN[table]}
        harness.store.close()
