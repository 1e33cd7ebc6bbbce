"""The SQL_REDO/SQL_UNDO corpus: every statement with its expected typed parse.

``data/redo_corpus.jsonl`` holds real-world LogMiner statements (shapes from Oracle's
LogMiner documentation and Debezium's parser tests, plus every column type and identifier
quirk), each with the row images it must give for the table in ``data/corpus_tables.json``:
``after``/``before`` list the columns the statement carries; every other column must be
NULL in an insert and ABSENT in an update or delete. A column whose value the redo cannot
show (XMLTYPE: ``Unsupported Type``) is in no image, so the table's description refuses it
by name: the pipeline stops before loading unless ``ignore_columns`` lists it (never a
column left out in silence, issue 36); so are INTERVAL columns, which the snapshot cannot
read yet.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.events import ABSENT
from cdc_core.capture.source import RefusedColumnsError, TableDescription
from cdc_core.ddl.descriptions import TableDescriptions
from connectors.oracle import errors
from connectors.oracle.logminer.contents import description_of
from connectors.oracle.logminer.redo_parser import parse_redo
from connectors.oracle.logminer.redo_values import row_images
from tests.connectors.oracle.corpus import image
from tests.connectors.oracle.replay import load_tables

DATA = Path(__file__).parent / "data"
CORPUS = [json.loads(line) for line in (DATA / "redo_corpus.jsonl").read_text("utf-8").splitlines()]
TABLES = load_tables(DATA / "corpus_tables.json")


def test_the_corpus_is_large_and_varied() -> None:
    assert len(CORPUS) >= 60
    assert len({entry["name"] for entry in CORPUS}) == len(CORPUS)
    ops = {entry["expect"]["op"] for entry in CORPUS if "expect" in entry}
    assert ops == {"c", "u", "d"}
    assert {entry["source"] for entry in CORPUS} == {"redo", "undo"}


def _same(actual: object, expected: object) -> bool:
    if isinstance(expected, float) and math.isnan(expected):
        return isinstance(actual, float) and math.isnan(actual)
    return type(actual) is type(expected) and actual == expected


def _assert_image(actual: dict[str, Any] | None, expected: dict[str, Any] | None) -> None:
    assert (actual is None) == (expected is None)
    if actual is None or expected is None:
        return
    assert actual.keys() == expected.keys()
    wrong = [c for c in expected if not _same(actual[c], expected[c])]
    assert not wrong, {c: (actual[c], expected[c]) for c in wrong}


@pytest.mark.parametrize("entry", [e for e in CORPUS if "expect" in e], ids=lambda e: e["name"])
def test_statement_parses_to_the_expected_images(entry: dict[str, Any]) -> None:
    schema = TABLES[entry["table"]]
    columns = [c.name for c in schema.columns if c.ltype is not None]
    refused = [c.name for c in description_of(schema).refused]
    assert set(c.name for c in schema.columns) - set(columns) <= set(refused)  # none in silence
    expect = entry["expect"]
    statement = parse_redo(entry["sql"])
    images = row_images(statement, schema, undo=entry["source"] == "undo")
    assert statement.op == expect["op"]
    assert f"{statement.owner}.{statement.table}".upper() == entry["table"].upper()
    assert statement.rowid == expect["rowid"]
    insert = expect["op"] == "c"
    _assert_image(images.after, image(expect["after"], columns, None if insert else ABSENT))
    _assert_image(images.before, image(expect["before"], columns, ABSENT))


@pytest.mark.parametrize("entry", [e for e in CORPUS if "error" in e], ids=lambda e: e["name"])
def test_statement_fails_with_a_clear_error(entry: dict[str, Any]) -> None:
    error = getattr(errors, entry["error"])
    with pytest.raises(error) as caught:
        row_images(parse_redo(entry["sql"]), TABLES[entry["table"]], scn=4242)
    if error is errors.DictionaryMismatchError:
        assert "4242" in str(caught.value) and "Re-snapshot" in str(caught.value)


class _CorpusReader:
    """The pipeline's view of the corpus tables: a log reader's ``describe``."""

    def describe(self, table: str) -> TableDescription:
        return description_of(TABLES[table])


@pytest.mark.parametrize(
    ("table", "refused"),
    [
        ("DEBEZIUM.TEST", {"UT": "XMLTYPE"}),
        (
            "DEBEZIUM.ALLTYPES",
            {
                "IYM": "INTERVAL YEAR(2) TO MONTH",
                "IDS": "INTERVAL DAY(2) TO SECOND(6)",
                "X": "XMLTYPE",
            },
        ),
        ("OE.PRODUCT_INFORMATION", {"WARRANTY_PERIOD": "INTERVAL YEAR(2) TO MONTH"}),
    ],
)
def test_columns_no_image_or_snapshot_carries_are_refused_by_name(
    table: str, refused: dict[str, str]
) -> None:
    """XMLTYPE's value is ``Unsupported Type`` in the redo and an INTERVAL is not read by the
    snapshot: the pipeline refuses the table, naming each such column and its type, unless
    ``ignore_columns`` lists them; then it carries every other column (LOBs included: their
    fragments are assembled)."""
    described = description_of(TABLES[table])
    assert {c.name: c.native_type for c in described.refused} == refused
    reader: Any = _CorpusReader()
    with pytest.raises(RefusedColumnsError) as caught:
        TableDescriptions(reader, {}).get(table)
    for name, native in refused.items():
        assert f"{name} ({native})" in caught.value.message
    assert f"ignore_columns: {{{table}: [{', '.join(refused)}]}}" in caught.value.message
    carried = TableDescriptions(reader, {table: frozenset(refused)}).get(table)
    columns = [c.name for c in TABLES[table].columns]
    assert carried.schema.names == [c for c in columns if c not in refused]
