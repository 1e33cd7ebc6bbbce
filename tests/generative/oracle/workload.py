"""Workloads of the Oracle generative tester: data, not code.

A workload is transactions of abstract operations whose choices are plain integers
(``picks``), and DDL items between them; ``model.interpret`` resolves each choice against
the rows that exist at that point ("the 3rd live row", "a free key"). So dropping a
transaction or an operation (shrinking) leaves a workload that still means something, and
the same workload always renders the same log. ``Features`` says what ``generate`` may put
in one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.generative.oracle.tables import TABLES


@dataclass(frozen=True)
class Features:
    """What a workload may contain; the flags default to what the pipeline handles today."""

    interleave: bool = True
    rollbacks: bool = True
    partial_rollbacks: bool = True
    row_movement: bool = True
    csf: bool = True
    region_zones: bool = True
    truncate: bool = True
    ddl_harmless: bool = True  # constraints, indexes, a VARCHAR2 widened: no stored value changes
    key_changes: bool = True  # single moves, ascending shifts, swaps (the pipeline's KeyMoves)
    ddl_schema: bool = True  # a nullable column added, then older rows updated
    ddl_refresh: bool = True  # ADD ... DEFAULT, DROP / RENAME COLUMN: need the table refresh
    unsupported: bool = True  # LONG values shown as Unsupported Type: read as of the commit
    restarts: bool = True  # the pipeline stopped or crashed, then run again on its state
    lobs: bool = True  # long CLOB values written as LOB fragments (else inline)
    # A reader mining with the online catalog after a DROP or RENAME COLUMN: LogMiner renders
    # the table's older redo with the newer dictionary (STATUS 2); the pipeline must stop,
    # naming the fix. Off by default: it ends such a workload there.
    ddl_lag: bool = False
    logminer: bool = True  # the real reader loop over the model's log, in some workloads

    def names(self) -> list[str]:
        """The flags that are on."""
        return [name for name, on in vars(self).items() if on]


@dataclass(frozen=True)
class Op:
    """One statement of a transaction: ``kind`` on table ``table``, choices in ``picks``."""

    kind: str  # insert update delete key_change key_shift key_swap move undo
    table: int
    picks: tuple[int, ...]


@dataclass(frozen=True)
class Txn:
    ops: tuple[Op, ...]
    commit: bool = True
    overlap: bool = False  # may start before the transactions before it commit
    seed: int = 0  # interleaving and rendering choices


@dataclass(frozen=True)
class Ddl:
    kind: str  # add_nullable add_default drop_column rename_column widen constraint truncate
    table: int
    pick: int = 0


Item = Txn | Ddl


@dataclass(frozen=True)
class Workload:
    items: tuple[Item, ...]
    batch_max_events: int = 50
    memory_budget_bytes: int = 1 << 20
    refresh_chunk_rows: int = 10_000  # rows per chunk of a table refresh
    source_seed: int = 0  # when the source's "now" runs ahead of the reader (``source``)
    interruptions: tuple[Interruption, ...] = ()  # in order, before the run to the end
    # How the log is read: the replay reader, or the real OracleLogReader over the model
    # served as a LogMiner database (``logminer_model``): primary, standby or RAC.
    log: str = "replay"


LOG_READS = ("replay", "primary", "standby", "rac")


@dataclass(frozen=True)
class Interruption:
    """The pipeline stops (``stop()``) or crashes (an exception) once ``after`` durable
    transactions (or parts, or refresh chunks) have reached the lake since it started."""

    after: int
    how: str  # stop crash

    def __post_init__(self) -> None:
        if self.after < 1 or self.how not in ("stop", "crash"):
            raise ValueError(f"not an interruption: {self}")


SIZE = 24


def generate(seed: int, features: Features, size: int = SIZE) -> Workload:
    """A random workload of about ``size`` items."""
    rng = random.Random(seed)
    items: list[Item] = []
    for index in range(size):
        if index > 4 and rng.random() < 0.12:
            ddl = _ddl(rng, features)
            if ddl is not None:
                items.append(ddl)
                continue
        items.append(_txn(rng, features))
    batch, budget = rng.choice((10, 100, 1000)), rng.choice((0, 4096, 1 << 20))
    chunk, source = rng.choice((1, 3, 10_000)), rng.randrange(10**6)
    stops = tuple(
        Interruption(rng.randint(1, size), rng.choice(("stop", "crash")))
        for _ in range(rng.randint(0, 2) if features.restarts else 0)
    )
    log = rng.choice(LOG_READS) if features.logminer else "replay"
    return Workload(tuple(items), batch, budget, chunk, source, stops, log)


def _txn(rng: random.Random, features: Features) -> Txn:
    kinds = ["insert"] * 5 + ["update"] * 4 + ["delete"] * 2
    kinds += ["key_change", "key_shift", "key_swap"] * features.key_changes
    kinds += ["move"] * 2 * features.row_movement
    kinds += ["undo"] * features.partial_rollbacks
    ops = tuple(
        Op(rng.choice(kinds), rng.randrange(len(TABLES)), _picks(rng))
        for _ in range(rng.randint(1, 5))
    )
    commit = not (features.rollbacks and rng.random() < 0.15)
    return Txn(ops, commit, features.interleave and rng.random() < 0.6, rng.randrange(10**6))


def _picks(rng: random.Random) -> tuple[int, ...]:
    return tuple(rng.randrange(10**6) for _ in range(12))


def _ddl(rng: random.Random, features: Features) -> Ddl | None:
    kinds = ["constraint", "widen"] * features.ddl_harmless + ["truncate"] * features.truncate
    kinds += ["add_nullable"] * 2 * features.ddl_schema
    kinds += ["add_default", "drop_column", "rename_column"] * features.ddl_refresh
    return (
        Ddl(rng.choice(kinds), rng.randrange(len(TABLES)), rng.randrange(10**6)) if kinds else None
    )
