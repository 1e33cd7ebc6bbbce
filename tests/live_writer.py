"""A writer that keeps changing a source while a test compares it with a live replica."""

from __future__ import annotations

import contextlib
import random
import threading
from collections.abc import Iterator, Sequence

from tests.private_servers import MariaDBServer, PostgresServer


@contextlib.contextmanager
def updating(
    server: MariaDBServer | PostgresServer, database: str, keys: Sequence[int], seed: int = 7
) -> Iterator[list[int]]:
    """Update ``t.v`` of random ``keys``, one transaction each, until the block ends; the
    keys updated so far."""
    stop, touched = threading.Event(), []

    def write() -> None:
        chance = random.Random(seed)
        with contextlib.closing(server.connect(database)) as conn:
            cursor = conn.cursor()
            while not stop.is_set():
                key = chance.choice(keys)
                cursor.execute("UPDATE t SET v = v + 1 WHERE id = %s", (key,))
                conn.commit()
                touched.append(key)
                stop.wait(0.005)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield touched
    finally:
        stop.set()
        thread.join(30)
