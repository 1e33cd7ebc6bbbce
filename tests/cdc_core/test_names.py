"""The canonical table name form and the lake directory encoding (cdc_core.names)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc_core.errors import ConfigError
from cdc_core.names import (
    TableName,
    backtick_quote,
    format_part,
    from_lake_dir,
    parse_table,
    qualify,
    split_table,
    to_lake_dir,
)

AWKWARD = [
    "order-lines",
    "my table",
    "a`b",
    'a"b',
    "v1.2",
    "select",
    "MixedCase",
    "données",
    "😀",
    "1abc",
    "$x#y",
    "a'b",
    " lead",
    "trail ",
    "",
    "_replcheck",
    "..",
    "a=b",
    "50%",
]
# Any text, surrogates included (a Python str may hold them; a name must still round trip).
parts = st.text(st.characters(), max_size=80)


@pytest.mark.parametrize(
    ("parts", "text"),
    [
        (("shop", "orders"), "shop.orders"),
        (("shop", "order-lines"), "shop.order-lines"),
        (("shop", "my table"), "shop.my table"),
        (("shop", "v1.2"), 'shop."v1.2"'),
        (("shop", 'a"b'), 'shop."a""b"'),
        (("sh.op", "t"), '"sh.op".t'),
        (("shop", "a`b"), "shop.a`b"),
        (("shop", ""), 'shop.""'),
        (("shop", " x "), 'shop." x "'),
        (("données", "😀"), "données.😀"),
        (("orders",), "orders"),
    ],
)
def test_canonical_text_of_examples(parts: tuple[str, ...], text: str) -> None:
    name = TableName(parts[-1], parts[0] if len(parts) == 2 else None)
    assert str(name) == text
    assert parse_table(text) == name


@given(schema=parts, name=parts)
def test_parse_inverts_format(schema: str, name: str) -> None:
    assert parse_table(str(TableName(name, schema))) == TableName(name, schema)
    assert parse_table(format_part(name)) == TableName(name)


@given(schema=parts, name=parts)
def test_format_is_bare_exactly_when_safe(schema: str, name: str) -> None:
    text = format_part(name)
    quoted = name == "" or "." in name or '"' in name or name != name.strip(" ")
    assert text.startswith('"') == quoted
    assert (text == name) != quoted


def test_split_and_qualify_use_the_default_schema_only_for_bare_names() -> None:
    assert split_table("orders", "shop") == ("shop", "orders")
    assert split_table('"a.b".c', "shop") == ("a.b", "c")
    assert qualify("my table", "shop") == "shop.my table"
    assert qualify('x."v1.2"', "shop") == 'x."v1.2"'


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a.b.c", "3 dot-separated parts"),
        ('a"b.c', 'holds a "'),
        ('"a.b', 'no closing "'),
        ('"a"b.c', "must end at a dot"),
    ],
)
def test_unreadable_names_are_config_errors_naming_the_fix(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(why)) as error:
        parse_table(text)
    assert error.value.context == {"table": text}
    assert "double-quote" in str(error.value) or "doubled" in str(error.value)


@pytest.mark.parametrize(
    ("part", "directory"),
    [
        ("orders", "orders"),
        ("order-lines_2", "order-lines_2"),
        ("my table", "my~20table"),
        ("données", "donn~C3~A9es"),
        ("a=b", "a~3Db"),
        (".hidden", "~2Ehidden"),
        ("50%", "50~25"),
        ("", "~"),
        ("_replcheck", "~5Freplcheck"),
        ("_REPLCHECK", "~5FREPLCHECK"),
        ("_other", "_other"),
        ("a~b", "a~7Eb"),
        ("\ud800", "~ED~A0~80"),
    ],
)
def test_lake_dir_examples(part: str, directory: str) -> None:
    assert to_lake_dir(part) == directory
    assert from_lake_dir(directory) == part


@given(part=parts)
def test_lake_dir_round_trips_and_uses_a_safe_alphabet(part: str) -> None:
    directory = to_lake_dir(part)
    assert re.fullmatch(r"[A-Za-z0-9_~-]+", directory)
    assert directory.lower() != "_replcheck"
    assert not directory.startswith(".")
    if len(directory) <= 240 and "~~" not in directory:
        assert from_lake_dir(directory) == part


@given(first=parts, second=parts)
def test_lake_dir_is_injective(first: str, second: str) -> None:
    if first != second:
        assert to_lake_dir(first) != to_lake_dir(second)


def test_long_names_are_shortened_with_a_hash_and_stay_distinct() -> None:
    first, second = "数" * 64, "数" * 63 + "字"
    assert len(to_lake_dir(first).encode()) <= 240
    assert to_lake_dir(first) != to_lake_dir(second)
    assert "~~" in to_lake_dir(first)
    with pytest.raises(ValueError, match="shortened"):
        from_lake_dir(to_lake_dir(first))


def test_names_of_the_safe_alphabet_keep_their_directory() -> None:
    for part in ["orders", "Order_Lines-2", "_x", "-"]:
        assert to_lake_dir(part) == part


def test_backtick_quote_doubles_backticks() -> None:
    assert backtick_quote("a`b.c") == "`a``b.c`"
    assert backtick_quote("") == "``"


@pytest.mark.parametrize("part", AWKWARD)
def test_awkward_parts_round_trip(part: str) -> None:
    text = str(TableName(part, "s"))
    assert parse_table(text) == TableName(part, "s")
    assert from_lake_dir(to_lake_dir(part)) == part


def test_a_source_column_named_like_a_bookkeeping_column_is_refused_naming_the_fix() -> None:
    import pyarrow as pa

    from cdc_core.capture.source import TableDescription
    from cdc_core.errors import ContractError

    schema = pa.schema([("id", pa.int64()), ("_op", pa.string())])
    with pytest.raises(ContractError, match=r"table s\.t has columns \['_op'\].*rename"):
        TableDescription("s.t", schema, ("id",))
    assert TableDescription("s.t", pa.schema([("op", pa.string())]), ()).table == "s.t"


def test_source_columns_differing_only_in_case_are_refused_naming_them() -> None:
    import pyarrow as pa

    from cdc_core.capture.source import TableDescription
    from cdc_core.errors import ContractError

    schema = pa.schema([("id", pa.int64()), ("Amount", pa.int64()), ("amount", pa.int64())])
    with pytest.raises(ContractError, match=r"\[\['Amount', 'amount'\]\] that differ only in case"):
        TableDescription("s.t", schema, ("id",))
