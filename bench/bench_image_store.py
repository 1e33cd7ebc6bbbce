"""Writes/s and lookups/s of embedded stores for the rebuild's row image store.

Each candidate stores N row versions keyed by (table, locator, position, seq) -- the key
layout of ``cdc_core.rebuild.image_store`` -- with a 6-column image (``to_image_bytes``) as the
value, committing every ``--batch`` writes, then answers N lookups of "the latest version
at or before a position" for random locators. The first three are the same
operations written directly against each backend, to choose it; ``lmdb-store`` is the
result:

- ``sqlite``: SQLite (standard library), WAL, ``synchronous=FULL`` at commit, 64 MB page
  cache, one ``WITHOUT ROWID`` table clustered on the version key, lookups by a row-value
  range seek (``(pos, seq) <= (?, ?) ORDER BY pos DESC, seq DESC LIMIT 1``);
- ``rocksdict``: RocksDB (raw mode), ``WriteBatch`` per batch, lookups by
  ``seek_for_prev``;
- ``lmdb``: LMDB, one write transaction per batch, lookups by ``set_range`` + ``prev``;
- ``lmdb-store``: the real ``cdc_core.rebuild.image_store.RowImageStore`` (LMDB, the winner), with
  ``flush`` every batch and ``get`` for lookups (the truncate and retention checks
  included).

    python -m bench.bench_image_store [--rows 1000000] [--batch 10000] [--only NAME ...]
                                      [--plain] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from cdc_core.capture.position import MAX_POSITION, Position
from cdc_core.rebuild.image_store import (
    RowImageStore,
    from_image_bytes,
    to_image_bytes,
    to_locator_bytes,
)

TABLE = "shop.orders"
TS = datetime(2026, 11, 22, tzinfo=UTC)
Measure = Callable[[Path, int, int, list[int]], tuple[float, float]]


def make_image(i: int) -> dict[str, object]:
    """A typical narrow row: key, ints, a decimal, text and a timestamp."""
    return {"id": i, "qty": i % 100, "price": Decimal(i % 997) / 100, "note": "note " * 4,
            "customer": i % 5000, "ts": TS}  # fmt: skip


def make_plain_image(i: int) -> dict[str, object]:
    """The same shape with only ints and text: isolates the value codec's share of the cost."""
    return {"id": i, "qty": i % 100, "price": i % 997, "note": "note " * 4,
            "customer": i % 5000, "ts": 1_790_000_000_000_000 + i}  # fmt: skip


# Images are built once, so the loops time the stores rather than building dicts.
POOL = [make_image(i) for i in range(1000)]


def image(i: int) -> dict[str, object]:
    """One of the pre-built images."""
    return POOL[i % len(POOL)]


def kv_key(locator: tuple[int, ...], position: int, seq: int) -> bytes:
    """The single-key form for ordered key-value stores: prefix, then big-endian position."""
    table = TABLE.encode()
    loc = to_locator_bytes(locator)
    prefix = len(table).to_bytes(2, "big") + table + len(loc).to_bytes(4, "big") + loc
    return prefix + position.to_bytes(8, "big") + seq.to_bytes(8, "big")


def timed(run: Callable[[], None], count: int) -> float:
    start = time.perf_counter()
    run()
    return count / (time.perf_counter() - start)


def bench_lmdb_store(
    directory: Path, rows: int, batch: int, probe: list[int]
) -> tuple[float, float]:
    store = RowImageStore(directory / "images")

    def write() -> None:
        for i in range(rows):
            store.put(TABLE, (i,), Position(i + 1, "p"), image(i), 0)
            if i % batch == batch - 1:
                store.flush()
        store.flush()

    def read() -> None:
        for i in probe:
            if store.get(TABLE, (i,)) is None:
                raise SystemExit(f"FAIL: lmdb-store lost row {i}")

    writes = timed(write, rows)
    reads = timed(read, len(probe))
    store.close()
    return writes, reads


_SQLITE_SCHEMA = (
    "CREATE TABLE row_versions (tbl TEXT NOT NULL, loc BLOB NOT NULL, pos INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, image BLOB, PRIMARY KEY (tbl, loc, pos, seq)) WITHOUT ROWID"
)
_SQLITE_GET = (
    "SELECT pos, seq, image FROM row_versions WHERE tbl = ? AND loc = ? AND (pos, seq) <= (?, ?)"
    " ORDER BY pos DESC, seq DESC LIMIT 1"
)


def bench_sqlite(directory: Path, rows: int, batch: int, probe: list[int]) -> tuple[float, float]:
    db = sqlite3.connect(directory / "images.db", isolation_level=None)
    for pragma in (
        "journal_mode=WAL",
        "synchronous=FULL",
        "cache_size=-65536",
        "temp_store=MEMORY",
    ):
        db.execute(f"PRAGMA {pragma}")
    db.execute(_SQLITE_SCHEMA)

    def write() -> None:
        db.execute("BEGIN")
        for i in range(rows):
            loc = to_locator_bytes((i,))
            db.execute(
                "INSERT OR REPLACE INTO row_versions VALUES (?, ?, ?, ?, ?)",
                (TABLE, loc, i + 1, 0, to_image_bytes(image(i))),
            )
            if i % batch == batch - 1:
                db.execute("COMMIT")
                db.execute("BEGIN")
        db.execute("COMMIT")

    def read() -> None:
        for i in probe:
            row = db.execute(
                _SQLITE_GET, (TABLE, to_locator_bytes((i,)), MAX_POSITION, MAX_POSITION)
            ).fetchone()
            if row is None:
                raise SystemExit(f"FAIL: sqlite lost row {i}")
            from_image_bytes(row[2])

    writes = timed(write, rows)
    reads = timed(read, len(probe))
    db.close()
    return writes, reads


def bench_rocksdict(
    directory: Path, rows: int, batch: int, probe: list[int]
) -> tuple[float, float]:
    from rocksdict import Options, Rdict, WriteBatch

    db = Rdict(str(directory / "rocks"), options=Options(raw_mode=True))

    def write() -> None:
        wb = WriteBatch(raw_mode=True)
        for i in range(rows):
            wb.put(kv_key((i,), i + 1, 0), to_image_bytes(image(i)))
            if i % batch == batch - 1:
                db.write(wb)
                wb = WriteBatch(raw_mode=True)
        db.write(wb)
        db.flush_wal(True)

    def read() -> None:
        it = db.iter()
        for i in probe:
            upper = kv_key((i,), MAX_POSITION, MAX_POSITION)
            it.seek_for_prev(upper)
            if not (it.valid() and it.key()[:-16] == upper[:-16]):
                raise SystemExit(f"FAIL: rocksdict lost row {i}")
            from_image_bytes(it.value())

    writes = timed(write, rows)
    reads = timed(read, len(probe))
    db.close()
    return writes, reads


def bench_lmdb(directory: Path, rows: int, batch: int, probe: list[int]) -> tuple[float, float]:
    import lmdb

    env = lmdb.open(str(directory / "lmdb"), map_size=16 << 30)

    def write() -> None:
        for start in range(0, rows, batch):
            with env.begin(write=True) as txn:
                for i in range(start, min(start + batch, rows)):
                    txn.put(kv_key((i,), i + 1, 0), to_image_bytes(image(i)))

    def read() -> None:
        with env.begin() as txn:
            cursor = txn.cursor()
            for i in probe:
                upper = kv_key((i,), MAX_POSITION, MAX_POSITION)
                found = cursor.prev() if cursor.set_range(upper) else cursor.last()
                if not (found and cursor.key()[:-16] == upper[:-16]):
                    raise SystemExit(f"FAIL: lmdb lost row {i}")
                from_image_bytes(cursor.value())

    writes = timed(write, rows)
    reads = timed(read, len(probe))
    env.close()
    return writes, reads


CANDIDATES: dict[str, Measure] = {
    "sqlite": bench_sqlite,
    "rocksdict": bench_rocksdict,
    "lmdb": bench_lmdb,
    "lmdb-store": bench_lmdb_store,
}


def iter_results(names: list[str], rows: int, batch: int, base: Path | None) -> Iterator[str]:
    probe = random.Random(42).choices(range(rows), k=rows)
    for name in names:
        with tempfile.TemporaryDirectory(dir=base) as directory:
            try:
                writes, reads = CANDIDATES[name](Path(directory), rows, batch, probe)
            except ImportError as exc:
                yield f"| {name} | - | - | not installed ({exc.name}) |"
                continue
            size = sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file())
            yield f"| {name} | {writes:,.0f} | {reads:,.0f} | {size / (1 << 20):,.0f} MB on disk |"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--only", nargs="*", choices=sorted(CANDIDATES), default=None)
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go")
    parser.add_argument(
        "--plain", action="store_true", help="ints and text only, no decimal or timestamp"
    )
    args = parser.parse_args()
    if args.plain:
        POOL[:] = [make_plain_image(i) for i in range(len(POOL))]
    print(f"{args.rows:,} rows ({'plain' if args.plain else 'typical'} images), commit every"
          f" {args.batch:,} writes; Python {platform.python_version()},"
          f" SQLite {sqlite3.sqlite_version}, {platform.machine()}")  # fmt: skip
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores)")
    print("| store | writes/s | lookups/s (random) | notes |\n|---|---:|---:|---|")
    for line in iter_results(args.only or list(CANDIDATES), args.rows, args.batch, args.dir):
        print(line, flush=True)
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
