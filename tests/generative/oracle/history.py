"""The source's history: what its tables held at every SCN of a rendered workload.

The model (``model.interpret``) knows the source after each item of a workload; the
renderer (``render.Renderer.positions``) knows the SCN each item committed at. Together
they answer what an Oracle flashback query ``AS OF SCN P`` shows: exactly the items whose
commit SCN is <= P (Oracle Database Development Guide, "Using Oracle Flashback Query"),
values a DDL gave existing rows without redo included (an ``ADD ... DEFAULT``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tests.generative.oracle.model import DdlScript, Script, Snapshot, TxnScript
from tests.generative.oracle.render import Renderer
from tests.generative.oracle.workload import Features

Record = dict[str, object]


@dataclass(frozen=True)
class History:
    """A rendered workload: the model's script, its contents records, and per item the SCN
    from which a snapshot shows it (``None``: a transaction that rolled back)."""

    script: Script
    records: list[Record]
    positions: list[int | None]
    lagged: int = 0  # rows rendered with a newer dictionary (``Features.ddl_lag``)

    def at(self, scn: int) -> Snapshot:
        """The committed state of every table as of ``scn``."""
        latest = self.script.start()
        for state, position in zip(self.script.states, self.positions, strict=True):
            if position is not None and position <= scn:
                latest = state
        return latest

    def committed(self) -> Iterator[tuple[int, TxnScript | DdlScript, Snapshot]]:
        """The items that changed the source, in commit order: ``(commit SCN, item, state
        right after it)``."""
        for item, state, position in zip(
            self.script.items, self.script.states, self.positions, strict=True
        ):
            if position is not None:
                yield position, item, state

    def ddl_transactions(self) -> list[tuple[int, int]]:
        """``(SCN of its DDL row, SCN of its commit)`` of every DDL transaction."""
        ddl = {r["XID"]: int(str(r["SCN"])) for r in self.records if r["OPERATION_CODE"] == 5}
        commits = {r["XID"]: int(str(r["SCN"])) for r in self.records if r["OPERATION_CODE"] == 7}
        return sorted((scn, commits[xid]) for xid, scn in ddl.items())


def render(script: Script, features: Features) -> History:
    """Render ``script`` as LogMiner would show it, keeping the SCN of each item."""
    renderer = Renderer(script, features)
    records = renderer.render()
    return History(script, records, renderer.positions, renderer.lagged)
