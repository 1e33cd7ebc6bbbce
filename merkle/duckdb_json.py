"""The ``json`` payload of ``merkle.canonical`` as DuckDB SQL: a second implementation of
the JSON rule, independent of Python's ``json`` parser and of ``merkle.canonical.json_text``.

DuckDB's JSON reader (yyjson) finds the structure; this SQL writes the canonical text.
DuckDB's own JSON text is not used as it is, because it re-serialises numbers from doubles
(``1.00000000000000000001`` reads as ``1.0``), keeps duplicate keys in document order and
escapes strings by its own rules. Instead:

1. The text is cut into tokens by a regular expression: a key (a string then ``:``), a
   string value, a number, anything else. Each number becomes the JSON string
   ``"n<decimal payload>"``, its payload computed from its digits as text (never through
   a double), and each string value ``"s<its text>"``, so a leaf of the parsed tree says
   which it was. Keys are left alone.
2. What yyjson accepts beyond RFC 8259 is refused, as Python's ``json`` refuses it: a
   trailing comma (DuckDB reads ``[1,]``), ``NaN`` and ``Infinity`` (a number leaf left
   after step 1), number-like text outside the grammar (``01``, ``1.``, ``+1``) and a
   number as a key (``{1:2}`` would read as ``{"n1":2}``). Every refusal is an ``error()``
   whose message holds no value.
3. The parsed tree is cut into pieces of text, each with a path that sorts it into
   place: a pass a level expands every container into its opening bracket, its members
   and its closing bracket. The document's depth is read from its brackets first; DuckDB
   cannot recurse over a value, so the passes are a ``list_reduce`` over that many
   levels, at most ``MAX_JSON_DEPTH`` (a document nested deeper raises an error when the
   query runs, instead of hashing wrongly). An object's keys lose their duplicates (the
   last wins, as in Python's ``json``) and are numbered in code point order (DuckDB
   compares VARCHAR by UTF-8 bytes, which is code point order, not UTF-16 order). The
   pieces are then sorted by path and written: keys and strings with the contract's
   escapes.

Functions: https://duckdb.org/docs/data/json/json_functions ,
https://duckdb.org/docs/sql/functions/list ,
https://duckdb.org/docs/sql/functions/regular_expressions .
"""

from __future__ import annotations

MAX_JSON_DEPTH = 128
"""Nesting levels the SQL walks (the golden vectors reach 4). A document nested deeper
raises an error when the query runs; its depth is found first, so the bound costs nothing
for shallower ones."""

# One regular expression a number: a token that does not match it has no integer part.
_NUMBER = r"^(-?)(0|[1-9][0-9]*)(?:[.]([0-9]+))?(?:[eE]([+-]?[0-9]+))?$"
_STRING = r'"(?:[^"\\]|\\.)*"'
# Leftmost alternative first (RE2): a key keeps its colon, so a string value never ends in
# one; a number-like run takes a colon after it too, so that a number key is seen. The
# last two alternatives keep every other character, so invalid text stays invalid.
_TOKEN = rf'(?s){_STRING}\s*:|{_STRING}|-?[0-9][0-9.eE+-]*(?:\s*:)?|[^"0-9-]+|.'
_WHITESPACE = "' ' || chr(9) || chr(10) || chr(13)"  # RFC 8259's four
_ESCAPED = r'[\x00-\x1f"\\]'
_EMPTY = "''"
_CONTAINER = "jv.y IN ('OBJECT', 'ARRAY')"


def _literal(text: str) -> str:
    """A DuckDB string literal (a backslash is an ordinary character in one)."""
    return "'" + text.replace("'", "''") + "'"


def _error(reason: str) -> str:
    return f"error({_literal('invalid JSON document: ' + reason)})"


def _let(value: str, name: str, body: str) -> str:
    """``body`` with ``name`` bound to ``value``, evaluated once (a one-element list)."""
    return f"list_transform([{value}], lambda {name}: {body})[1]"


def _number(groups: str) -> str:
    """The ``decimal`` payload of a JSON number from its parts (``s`` sign, ``i`` integer,
    ``f`` fraction, ``e`` exponent digits), by text, never through a double. Without an
    exponent, the fraction loses its trailing zeros; with one, the digits without leading
    and trailing zeros (``d``) are placed by the decimal point's place among them (``p``)."""
    fraction = f"rtrim({groups}.f, '0')"
    plain = (
        f"CASE WHEN {groups}.i = '0' AND {fraction} = '' THEN '0'"
        f" ELSE {groups}.s || {groups}.i || CASE WHEN {fraction} = '' THEN ''"
        f" ELSE '.' || {fraction} END END"
    )
    exponent = f"coalesce(TRY_CAST({groups}.e AS BIGINT), {_error('an exponent beyond 64 bits')})"
    digits = f"{groups}.i || {groups}.f"
    point = f"len({groups}.i) + {exponent} - (len({digits}) - len(ltrim({digits}, '0')))"
    parts = f"{{'s': {groups}.s, 'd': trim({digits}, '0'), 'p': {point}}}"
    placed = (
        "CASE WHEN jd.d = '' THEN '0'"
        " WHEN jd.p >= len(jd.d) THEN jd.s || jd.d || repeat('0', jd.p - len(jd.d))"
        " WHEN jd.p <= 0 THEN jd.s || '0.' || repeat('0', -jd.p) || jd.d"
        " ELSE jd.s || jd.d[1:jd.p] || '.' || jd.d[jd.p + 1:] END"
    )
    return f"CASE WHEN {groups}.e = '' THEN {plain} ELSE {_let(parts, 'jd', placed)} END"


def _rewrite(text: str) -> str:
    """Step 1 and 2 of the module doc: the text with numbers and string values marked."""
    tokens = f"regexp_extract_all({text}, {_literal(_TOKEN)})"
    groups = f"regexp_extract(jt, {_literal(_NUMBER)}, ['s', 'i', 'f', 'e'])"
    misplaced = _error("a number outside the grammar, or as a key")
    number = f"CASE WHEN jg.i = '' THEN {misplaced} ELSE '\"n' || {_number('jg')} || '\"' END"
    bare = f"translate(jt, {_WHITESPACE}, '')"
    token = (
        "CASE WHEN jt[1] = '\"' THEN"
        " CASE WHEN len(jt) > 1 AND jt[-1] = '\"' THEN '\"s' || jt[2:] ELSE jt END"
        f" WHEN contains('-0123456789', jt[1]) AND jt <> '-' THEN {_let(groups, 'jg', number)}"
        f" WHEN contains({bare}, ',]') OR contains({bare}, ',}}')"
        f" THEN {_error('a trailing comma')} ELSE jt END"
    )
    return f"array_to_string(list_transform({tokens}, lambda jt: {token}), '')"


def _escaped(text: str) -> str:
    """``text`` as a JSON string: only ``"``, ``\\`` and control characters escaped."""
    char = "jc"
    escape = (
        f"CASE {char} WHEN '\"' THEN '\\\"' WHEN '\\' THEN '\\\\' WHEN chr(8) THEN '\\b'"
        f" WHEN chr(12) THEN '\\f' WHEN chr(10) THEN '\\n' WHEN chr(13) THEN '\\r'"
        f" WHEN chr(9) THEN '\\t' ELSE CASE WHEN ord({char}) < 32"
        f" THEN printf('\\u%04X', ord({char})) ELSE {char} END END"
    )
    chars = f"string_split({text}, '')"  # code points
    slow = f"array_to_string(list_transform({chars}, lambda {char}: {escape}), '')"
    fast = f"CASE WHEN regexp_matches({text}, {_literal(_ESCAPED)}) THEN {slow} ELSE {text} END"
    return f"'\"' || {fast} || '\"'"


def _leaf(value: str, kind: str) -> str:
    """A scalar's text (``kind``: its ``json_type``). A string leaf's first character says
    what it was (module doc): ``n`` a number's payload, ``s`` a string. A number leaf is
    NaN or an infinity."""
    text = "js"
    marked = f"CASE WHEN {text}[1] = 'n' THEN {text}[2:] ELSE {_escaped(f'{text}[2:]')} END"
    string = _let(f"json_extract_string({value}, '$')", text, marked)
    return (
        f"CASE {kind} WHEN 'VARCHAR' THEN {string}"
        f" WHEN 'BOOLEAN' THEN CAST({value} AS VARCHAR) WHEN 'NULL' THEN 'null'"
        f" ELSE {_error('NaN and infinite numbers have no decimal encoding')} END"
    )


def _members(value: str, kind: str) -> str:
    """An object's (key, value) pairs, the last of equal keys kept, sorted by key; an
    array's elements with a NULL key, in order (``kind``: the ``json_type``)."""
    obj, key, index, pair = "jo", "jk", "ji", "jq"
    pairs = f"list_transform({obj}.k, lambda {key}, {index}: {{'k': {key}, 'v': {obj}.v[{index}]}})"
    last = f"lambda {pair}, {index}: NOT list_contains({obj}.k[{index} + 1:], {pair}.k)"
    listed = f"{{'k': json_keys({value}), 'v': json_extract({value}, '$.*')}}"
    members = _let(listed, obj, f"list_sort(list_filter({pairs}, {last}))")
    element = "je"
    elements = f"list_transform(json_extract({value}, '$[*]'), lambda {element}: "
    elements += f"{{'k': NULL::VARCHAR, 'v': {element}}})"
    return f"CASE WHEN {kind} = 'OBJECT' THEN {members} ELSE {elements} END"


def _piece(path: str, separator: str, key: str, bracket: str, value: str = "NULL") -> str:
    """One piece of the canonical text (module doc), written by ``_written`` at the end;
    ``y``: the ``json_type`` of its value, found once (each call parses the value)."""
    return (
        f"{{'p': {path}, 's': {separator}, 'k': CAST({key} AS VARCHAR), 'b': {bracket},"
        f" 'j': CAST({value} AS JSON), 'y': json_type({value})}}"
    )


def _expanded(piece: str) -> str:
    """A container piece as its opening bracket (with the container's separator and key),
    a piece per member, numbered in canonical order, and its closing bracket."""
    members, member, index = "jm", "jn", "jl"
    is_object = f"{piece}.y = 'OBJECT'"
    opening = f"CASE WHEN {is_object} THEN '{{' ELSE '[' END"
    closing = f"CASE WHEN {is_object} THEN '}}' ELSE ']' END"
    separator = f"CASE WHEN {index} > 1 THEN ',' ELSE '' END"
    path = f"list_append({piece}.p, {index})"
    child = _piece(path, separator, f"{member}.k", _EMPTY, f"{member}.v")
    children = f"list_transform({members}, lambda {member}, {index}: {child})"
    first = _piece(f"{piece}.p", f"{piece}.s", f"{piece}.k", opening)
    last = _piece(f"list_append({piece}.p, len({members}) + 1)", _EMPTY, "NULL", closing)
    return _let(
        _members(f"{piece}.j", f"{piece}.y"), members, f"[{first}] || {children} || [{last}]"
    )


def _split(pieces: str, done: str) -> str:
    """``{'d': done pieces, 'q': containers still to expand}`` of ``pieces`` (a list, used
    once), the former after ``done``."""
    split = "{'d': " + done + f" || list_filter(jy, lambda jv: NOT coalesce({_CONTAINER}, false)),"
    split += f" 'q': list_filter(jy, lambda jv: {_CONTAINER})}}"
    return _let(pieces, "jy", split)


def _pass(state: str) -> str:
    """One level of the walk: every container still to expand is expanded. Once none is
    left, a pass returns its state as it is, so shallow documents cost few passes."""
    expanded = f"flatten(list_transform({state}.q, lambda jp: {_expanded('jp')}))"
    return f"CASE WHEN len({state}.q) = 0 THEN {state} ELSE {_split(expanded, f'{state}.d')} END"


def _written(piece: str) -> str:
    """A piece's text: separator, escaped key and ``:``, then its bracket or scalar."""
    key = f"coalesce({_escaped(f'{piece}.k')} || ':', '')"
    value = (
        f"CASE WHEN {piece}.j IS NULL THEN {piece}.b ELSE {_leaf(f'{piece}.j', f'{piece}.y')} END"
    )
    return f"{piece}.s || {key} || {value}"


def _canonical(document: str, depth: str) -> str:
    """Canonical text of a parsed document (JSON) nesting ``depth`` levels deep. A pass a
    level cuts it into pieces with sortable paths (lists of member numbers: a container's
    opening bracket is its own path, member ``i`` extends it by ``i``, the closing bracket
    by one more than the member count); the pieces are then sorted by path, written and
    joined. The passes are one ``list_reduce`` over a counter, so the pass is spelled out
    once (DuckDB binds nested lambdas in exponential time, and each copy of a long
    expression costs memory). A pass over a finished document would still copy it: only
    ``depth`` passes run, at most ``MAX_JSON_DEPTH``, and a container left is an error."""
    root = _piece("[]::BIGINT[]", _EMPTY, "NULL", _EMPTY, document)
    state = _split(f"[{root}]", "[]")
    count = f"least({depth}, {MAX_JSON_DEPTH})"
    passes = f"list_reduce(range({count}), lambda jw, jz: {_pass('jw')}, {state})"
    ordered = f"list_sort(list_transform(jw.d, lambda jv: {{'p': jv.p, 't': {_written('jv')}}}))"
    joined = f"array_to_string(list_transform({ordered}, lambda jv: jv.t), '')"
    too_deep = _error(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return _let(passes, "jw", f"CASE WHEN len(jw.q) > 0 THEN {too_deep} ELSE {joined} END")


def _depth(text: str) -> str:
    """How deep the text's brackets nest outside strings, at most ``MAX_JSON_DEPTH + 1``:
    the innermost pairs of the brackets alone are removed, all at once, until none is
    left (no more rounds than there are opening brackets)."""
    brackets = f"regexp_replace({text}, {_literal(_STRING + '|[^][{}]')}, '', 'g')"
    rounds = f"least(length(replace(replace({brackets}, ']', ''), '}}', '')), {MAX_JSON_DEPTH + 1})"
    inner = r"regexp_replace(jb.s, '\[\]|\{\}', '', 'g')"
    peel = f"CASE WHEN jb.s = '' THEN jb ELSE {{'s': {inner}, 'n': jb.n + 1}} END"
    peeled = f"list_reduce(range({rounds}), lambda jb, jz: {peel}, {{'s': jh, 'n': 0}})"
    return _let(brackets, "jh", f"{peeled}.n")


def json_text_sql(text: str) -> str:
    """SQL of the canonical JSON text (VARCHAR) of the JSON document ``text`` (a VARCHAR
    expression); NULL stays NULL, an invalid document raises an error when it runs."""
    invalid = _error("not RFC 8259 JSON")
    canonical = _canonical("json(jr.r)", "jr.d")
    checked = f"CASE WHEN json_valid(jr.r) THEN {canonical} ELSE {invalid} END"
    read = f"{{'r': {_rewrite(text)}, 'd': {_depth(text)}}}"
    return f"CASE WHEN {text} IS NOT NULL THEN {_let(read, 'jr', checked)} END"


__all__ = ["MAX_JSON_DEPTH", "json_text_sql"]
