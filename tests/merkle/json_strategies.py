"""Hypothesis strategies: JSON documents as text, in the many spellings of one value.

A document is drawn as a tree, then written with random whitespace, numbers spelled with
leading, trailing and exponent digits (``12`` as ``1.20e1``, ``120E-1``, ``12.000``),
strings with or without ``\\u`` escapes (surrogate pairs beyond the BMP, ``\\/``), and
objects that may repeat a key. Every text is valid RFC 8259 JSON, so every implementation
of the contract must give it canonical bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

# Keys from a small alphabet, so objects repeat keys and sort across the awkward places:
# upper before lower case, U+FFFF before U+1F600 (not so in UTF-16), NUL, a combining mark.
_KEYS = st.text(alphabet=st.sampled_from('aAbé\x00\uffff\U0001f600\u0301"\\/'), max_size=3)
_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)  # no surrogates
_WHITESPACE = st.sampled_from(["", "", " ", "\n", "\t", " \r\n "])
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_SHORT_ESCAPES["\t"] = "\\t"


@dataclass(frozen=True, slots=True)
class Number:
    """A JSON number by its parts: ``[-]<integer>[.<fraction>][e<exponent>]``."""

    negative: bool
    integer: str
    fraction: str | None
    exponent: str | None


@dataclass(frozen=True, slots=True)
class Object:
    """A JSON object as written: its members in order, keys possibly repeated."""

    members: tuple[tuple[str, Any], ...]


_EXPONENTS = st.tuples(
    st.sampled_from(["e", "E"]), st.sampled_from(["", "+", "-"]), st.integers(0, 40)
).map(lambda parts: f"{parts[0]}{parts[1]}{parts[2]:0{1 + parts[2] % 3}d}")
NUMBERS = st.builds(
    Number,
    st.booleans(),
    st.from_regex(r"0|[1-9][0-9]{0,24}", fullmatch=True),
    st.none() | st.from_regex(r"[0-9]{1,24}", fullmatch=True),
    st.none() | _EXPONENTS,
)
_SCALARS = st.none() | st.booleans() | NUMBERS | _TEXT
TREES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(st.tuples(_KEYS, inner), max_size=4).map(lambda m: Object(tuple(m)))
    ),
    max_leaves=10,
)


def _escaped_char(char: str, style: str) -> str:
    if char in _SHORT_ESCAPES and style != "all":
        return _SHORT_ESCAPES[char]
    if char == "/" and style == "all":
        return "\\/"
    code = ord(char)
    if code < 0x20 or style == "all" or (style == "ascii" and code > 0x7E):
        if code > 0xFFFF:  # a surrogate pair, as JSON spells a code point beyond the BMP
            high, low = divmod(code - 0x10000, 0x400)
            return f"\\u{0xD800 + high:04X}\\u{0xDC00 + low:04x}"
        return f"\\u{code:04x}" if code % 2 else f"\\u{code:04X}"
    return char


def _string(text: str, draw: st.DrawFn) -> str:
    style = draw(st.sampled_from(["plain", "ascii", "all"]))
    return '"' + "".join(_escaped_char(char, style) for char in text) + '"'


def _number(number: Number) -> str:
    text = ("-" if number.negative else "") + number.integer
    if number.fraction is not None:
        text += "." + number.fraction
    return text + (number.exponent or "")


def _render(tree: Any, draw: st.DrawFn) -> str:
    space = draw(_WHITESPACE)
    if tree is None or isinstance(tree, bool):
        return space + {None: "null", True: "true", False: "false"}[tree]
    if isinstance(tree, Number):
        return space + _number(tree)
    if isinstance(tree, str):
        return space + _string(tree, draw)
    if isinstance(tree, Object):
        members = [
            f"{_string(k, draw)}{draw(_WHITESPACE)}:{_render(v, draw)}" for k, v in tree.members
        ]
        return space + "{" + ",".join(members) + draw(_WHITESPACE) + "}"
    return space + "[" + ",".join(_render(item, draw) for item in tree) + draw(_WHITESPACE) + "]"


@st.composite
def json_texts(draw: st.DrawFn) -> str:
    """One valid JSON document's text."""
    return _render(draw(TREES), draw) + draw(_WHITESPACE)
