"""LOB values assembled from LogMiner's fragments (``logminer/lob_runs.py``, ``lob_redo.py``),
on rows WRITTEN BY HAND from the Oracle documentation and the shapes Debezium's LOB parsers
read (no Oracle server has produced them): an insert with ``EMPTY_CLOB()`` then its
``SEL_LOB_LOCATOR`` and ``LOB_WRITE`` rows is one insert with the whole values; ``LOB_TRIM``
and ``LOB_ERASE`` apply; a LOB-only update is an update of its own; fragments over a value
not in the redo make the column ``UNAVAILABLE`` (read as of the commit) unless a write from
the start and a trim pin it down; undo rows undo the joined change whole; the rebuilt
committed events hold the whole value."""

from __future__ import annotations

import datetime as dt
import itertools
import tempfile
from pathlib import Path

import pytest

from cdc_core.buffer.transaction_buffer import BufferConfig, TransactionBuffer
from cdc_core.capture.events import ABSENT, UNAVAILABLE, Commit, RawChange
from connectors.model import SourceColumn, TableSchema
from connectors.oracle.logminer import lob_redo
from connectors.oracle.logminer.contents import ChangeAssembler, ContentsRow, description_of
from merkle import types as lt
from tests.connectors.oracle.harness import Core

DOCS = TableSchema(
    "SHOP.DOCS",
    (
        SourceColumn("ID", "NUMBER(10,0)", lt.IntegerType(), False),
        SourceColumn("BODY", "CLOB", lt.StringType(), True),
        SourceColumn("SCAN", "BLOB", lt.BytesType(), True),
    ),
    ("ID",),
)
X1, X2 = "0A001F00E7030000", "0B000300A1040000"
R1 = "AAAR3sAAEAAAACXAAA"
AT = dt.datetime(2026, 5, 1, 10, 0, 0)
CLOB_LOCATOR = (
    "DECLARE \n loc_c CLOB; \n buf_c VARCHAR2(6216); \n loc_b BLOB; \n buf_b RAW(6216);\nBEGIN\n"
    ' select "BODY" into loc_c from "SHOP"."DOCS" where "ID" = \'1\' and ROWID = '
    f"'{R1}' for update;"
)
BLOB_LOCATOR = CLOB_LOCATOR.replace('"BODY" into loc_c', '"SCAN" into loc_b')


def row(scn: int, xid: str, code: int, redo: str | None = None, **more: object) -> ContentsRow:
    names = {
        6: "START",
        7: "COMMIT",
        36: "ROLLBACK",
        1: "INSERT",
        2: "DELETE",
        3: "UPDATE",
        9: "SEL_LOB_LOCATOR",
    }
    names |= {10: "LOB_WRITE", 11: "LOB_TRIM", 29: "LOB_ERASE"}
    table = {} if code in (6, 7, 36) else {"seg_owner": "SHOP", "table_name": "DOCS", "row_id": R1}
    fields = table | more | {"sql_redo": redo}
    return ContentsRow(scn, AT, xid, code, names[code], **fields)  # type: ignore[arg-type]


def write(text: str, offset: int, buffer: str = "c") -> str:
    length = len(text) if buffer == "c" else len(bytes.fromhex(text))
    value = f"'{text}'" if buffer == "c" else f"HEXTORAW('{text}')"
    call = f"dbms_lob.write(loc_{buffer}, {length}, {offset}, buf_{buffer});"
    return f" buf_{buffer} := {value}; \n  {call}"


INSERT = 'insert into "SHOP"."DOCS"("ID","BODY","SCAN") values (\'1\',EMPTY_CLOB(),EMPTY_BLOB());'


def assemble(*rows: ContentsRow) -> list[RawChange]:
    assembler = ChangeAssembler({"SHOP.DOCS": DOCS}, dt.UTC)
    out: list[RawChange] = []
    for one in rows:
        out.extend(change for change in assembler.feed(one) if isinstance(change, RawChange))
    out.extend(assembler.flush())
    return out


def committed(*rows: ContentsRow) -> list[tuple[str, object]]:
    """``(op, after)`` of each change the transaction buffer commits from ``rows`` (the
    changes partial rollbacks undo left out): what the rebuild gets."""
    with tempfile.TemporaryDirectory() as spill:
        buffer = TransactionBuffer(BufferConfig(1 << 20, Path(spill)))
        out: list[tuple[str, object]] = []
        for change in assemble(*rows):
            for txn in buffer.feed(change):
                out += [(c.change.op, c.change.after) for c in txn.changes]
        return out


def test_lob_columns_are_carried() -> None:
    assert description_of(DOCS).refused == ()
    assert description_of(DOCS).schema.names == ["ID", "BODY", "SCAN"]


def test_an_insert_with_empty_lobs_and_its_fragments_is_one_insert_with_the_values() -> None:
    rows = (
        row(100, X1, 6),
        row(101, X1, 1, INSERT),
        row(102, X1, 9, CLOB_LOCATOR),
        row(102, X1, 10, write("Hello, ", 1)),
        row(103, X1, 10, write("LOB world", 8)),
        row(104, X1, 9, BLOB_LOCATOR),
        row(104, X1, 10, write("00FF10", 1, "b")),
        row(105, X1, 7),
    )
    whole = {"ID": 1, "BODY": "Hello, LOB world", "SCAN": b"\x00\xff\x10"}
    assert committed(*rows) == [("c", whole)]
    changes = assemble(*rows)  # in log order: each run's end undoes and emits it again
    assert all(a.position.value <= b.position.value for a, b in itertools.pairwise(changes))
    assert isinstance(changes[-1], Commit)


def test_trim_and_erase_apply_to_the_value_and_a_long_buffer_may_continue_in_csf_rows() -> None:
    piece = write("abcdefghij", 1)
    head, tail = piece[:20], piece[20:]
    changes = committed(
        row(100, X1, 1, INSERT),
        row(101, X1, 9, CLOB_LOCATOR),
        row(102, X1, 10, head, csf=1, rs_id="r1", ssn=1),
        row(102, X1, 10, tail, rs_id="r1", ssn=1),
        row(103, X1, 29, "dbms_lob.erase(loc_c, 2, 3);"),
        row(104, X1, 11, "dbms_lob.trim(loc_c, 8);"),
        row(105, X1, 7),
    )
    assert changes == [("c", {"ID": 1, "BODY": "ab  efgh", "SCAN": b""})]


def test_fragments_over_a_value_not_in_the_redo_leave_it_to_be_read_at_the_commit() -> None:
    """A LOB-only update of a row this transaction did not write: the old value is not in
    the redo, so the column is UNAVAILABLE (``unavailable_columns`` reads it as of the
    commit) unless the writes from offset 1 and a trim pin the whole value down."""
    unknown = committed(
        row(101, X1, 9, CLOB_LOCATOR), row(102, X1, 10, write("new", 2)), row(103, X1, 7)
    )
    assert unknown == [("u", {"BODY": UNAVAILABLE})]
    pinned = committed(
        row(101, X1, 9, CLOB_LOCATOR),
        row(102, X1, 10, write("rewritten", 1)),
        row(103, X1, 11, "dbms_lob.trim(loc_c, 9);"),
        row(104, X1, 7),
    )
    assert pinned == [("u", {"BODY": "rewritten"})]


def test_interleaved_transactions_keep_their_own_runs() -> None:
    other = 'insert into "SHOP"."DOCS"("ID","BODY","SCAN") values (\'2\',\'short\',NULL);'
    changes = committed(
        row(100, X1, 1, INSERT),
        row(101, X1, 9, CLOB_LOCATOR),
        row(102, X1, 10, write("one", 1)),
        row(103, X2, 1, other, row_id="AAAR3sAAEAAAACXAAB"),
        row(104, X1, 10, write("two", 4)),
        row(105, X2, 7),
        row(106, X1, 7),
    )
    assert changes == [
        ("c", {"ID": 2, "BODY": "short", "SCAN": None}),
        ("c", {"ID": 1, "BODY": "onetwo", "SCAN": b""}),
    ]


def test_a_rolled_back_run_writes_nothing() -> None:
    rolled = committed(
        row(100, X1, 6),
        row(101, X1, 9, CLOB_LOCATOR),
        row(102, X1, 10, write("gone", 1)),
        row(103, X1, 36),
    )
    assert rolled == []


def test_fragments_whose_locator_was_not_read_leave_every_lob_column_to_the_commit() -> None:
    """A restarted pipeline re-reads the log from its last change, which may fall inside a
    run (Oracle generative soak, seed 6114): which column the fragments write is not known,
    so every LOB column of the row is read as of the commit."""
    orphan = committed(row(101, X1, 6), row(102, X1, 10, write("00ff", 1, "b")), row(103, X1, 7))
    assert orphan == [("u", {"BODY": UNAVAILABLE, "SCAN": UNAVAILABLE})]


def test_a_value_longer_than_the_memory_bound_is_read_at_the_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lob_redo, "MAX_LOB_BYTES", 8)
    changes = committed(
        row(100, X1, 1, INSERT),
        row(101, X1, 9, CLOB_LOCATOR),
        row(102, X1, 10, write("0123456789", 1)),
        row(103, X1, 7),
    )
    assert changes == [("c", {"ID": 1, "BODY": UNAVAILABLE, "SCAN": b""})]


def test_the_rebuilt_events_hold_the_whole_value(tmp_path: Path) -> None:
    """Through the transaction buffer and the rebuild, as the pipeline runs them: the
    committed insert with the assembled value, then a LOB-only update of the row, whole."""
    events = Core(tmp_path).feed(
        iter(
            assemble(
                row(100, X1, 6),
                row(101, X1, 1, INSERT),
                row(102, X1, 9, CLOB_LOCATOR),
                row(102, X1, 10, write("x" * 5000, 1)),
                row(103, X1, 7),
                row(104, X2, 6),
                row(105, X2, 9, CLOB_LOCATOR),
                row(105, X2, 10, write("y" * 3, 1)),
                row(106, X2, 11, "dbms_lob.trim(loc_c, 3);"),
                row(107, X2, 7),
            )
        )
    )
    assert [(e.op, e.commit_scn) for e in events] == [("c", 103), ("u", 107)]
    assert events[0].after == {"ID": 1, "BODY": "x" * 5000, "SCAN": b""}
    assert events[1].after == {"ID": 1, "BODY": "yyy", "SCAN": b""}


def test_undo_rows_undo_the_joined_change_whole() -> None:
    """A rollback to a savepoint after an insert with LOB fragments: the LOB undo rows, then
    the insert's undo (a DELETE with ROLLBACK = 1), undo the one joined insert; LOB undo
    rows with no DML undo after them undo only what the run added."""
    undone_insert = committed(
        row(100, X1, 1, INSERT),
        row(101, X1, 9, CLOB_LOCATOR),
        row(101, X1, 10, write("text", 1)),
        row(102, X1, 9, CLOB_LOCATOR, rollback=1),
        row(102, X1, 10, write("", 1), rollback=1),
        row(103, X1, 2, 'delete from "SHOP"."DOCS" where ROWID = \'' + R1 + "';", rollback=1),
        row(104, X1, 7),
    )
    assert undone_insert == []
    undone_update = committed(
        row(100, X1, 3, 'update "SHOP"."DOCS" set "ID" = \'1\' where "ID" = \'1\';'),
        row(101, X1, 9, CLOB_LOCATOR),
        row(101, X1, 10, write("text", 1)),
        row(102, X1, 9, CLOB_LOCATOR, rollback=1),
        row(103, X1, 7),
    )
    statement_stays = {"ID": 1, "BODY": UNAVAILABLE, "SCAN": ABSENT}  # BODY: read at commit
    assert undone_update == [("u", statement_stays)]
