"""Limits on the size and shape of every file replcheck reads from its user.

A config, a ``result.json`` or a password file may come from anyone who can write where the
operator points replcheck. Without limits a crafted one costs minutes and gigabytes (a 200 MB
result, a YAML anchor bomb) or crashes the parser (``[`` nested 100,000 deep). Each limit is
far above anything replcheck writes or a person types, is checked before the expensive step
(the size by ``os.stat`` before reading; nesting by counting, never by recursing), and is
refused with a :class:`ConfigError` naming the file, the limit, its value and what to do.
``docs/security.md`` lists them.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import yaml

from cdc_core.errors import ConfigError

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class FileLimits:
    """How large and how deeply nested one kind of input file may be.

    Attributes:
        what: The kind of file, for messages (``"config file"``).
        max_bytes: Its largest size.
        max_depth: Its deepest nesting of lists and mappings.
        fix: What to do about a file over the size limit, ending its refusal.
    """

    what: str
    max_bytes: int
    max_depth: int
    fix: str

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.max_depth < 1:
            raise ValueError("limits must be positive")


CONFIG_LIMITS = FileLimits(
    "config file", 1 * MiB, 64, "a real config is far smaller: check that --config names it"
)
CONFIG_MAX_NODES = 1_000_000
"""Values in a config once its YAML aliases are expanded (a 1 MiB file holds fewer)."""

RESULT_LIMITS = FileLimits(
    "result file",
    64 * MiB,
    64,
    "lower validation.max_reported_rows (rows detailed per comparison) and validate again",
)
SECRET_MAX_BYTES = 64 * 1024
"""A password or key file: a secret, not a document."""


def size_text(size: int) -> str:
    """``"1 MiB"``, ``"64 KiB"``, ``"123 bytes"``."""
    for unit, scale in (("MiB", MiB), ("KiB", 1024)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size:,} bytes"


def read_limited(path: Path, limit: int, what: str, fix: str) -> bytes:
    """The bytes of ``path``, refused unread when larger than ``limit``.

    The size is checked with ``os.stat`` first, and at most ``limit + 1`` bytes are read, so a
    file that grows meanwhile or reports no size (a pipe, ``/dev/zero``) is refused too.

    Raises:
        ConfigError: the file is larger than ``limit``.
        OSError: the file cannot be read (the caller says which file it was).
    """
    if os.stat(path).st_size > limit:
        raise _too_large(path, limit, what, fix)
    with path.open("rb") as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise _too_large(path, limit, what, fix)
    return data


def _too_large(path: Path, limit: int, what: str, fix: str) -> ConfigError:
    return ConfigError(
        f"{what} {path} is larger than the limit of {size_text(limit)}; {fix}",
        {"file": str(path), "limit_bytes": limit},
    )


def check_private(path: Path, what: str) -> None:
    """Refuse a secret file that its group or others may read or write, as ssh does with keys.

    Raises:
        ConfigError: naming the file and the ``chmod`` that fixes it.
        OSError: the file cannot be examined.
    """
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"{what} {path} can be read or written by others (mode {mode:04o}); a secret must"
            f" be private to its owner: run chmod 600 {path}",
            {"file": str(path)},
        )


# A JSON string (its escapes included), the bytes that are not brackets, and an innermost
# pair: removing strings and non-brackets from a document leaves its brackets, so nesting is
# measured without parsing (``json.loads`` recurses, and fails at Python's recursion limit).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_INNERMOST = re.compile(rb"\[\]|\{\}")


def check_json_depth(data: bytes, path: Path, limits: FileLimits) -> None:
    """Refuse a JSON document nested deeper than ``limits.max_depth``, before ``json.loads``
    recurses into it.

    Each pass removes the innermost pairs (one level: a pair emptied by a pass is removed by
    the next); what is left after ``max_depth`` passes was nested deeper. Brackets that do not
    pair up are invalid JSON, left to ``json.loads`` to describe unless they could hide a
    deeper nesting.

    Raises:
        ConfigError: naming the file, the limit and what to do.
    """
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    for _ in range(limits.max_depth):
        remaining = _INNERMOST.sub(b"", brackets)
        if len(remaining) == len(brackets):  # nothing left, or brackets that do not pair up
            break
        brackets = remaining
    if len(brackets) > limits.max_depth:
        raise ConfigError(
            f"{limits.what} {path} is nested deeper than {limits.max_depth} levels (the"
            f" limit), or its brackets do not pair up; replcheck never writes such a file:"
            " give one it wrote",
            {"file": str(path), "limit_depth": limits.max_depth},
        )


class LimitedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a document nested deeper than ``CONFIG_LIMITS`` allows
    or holding more than ``CONFIG_MAX_NODES`` values once its aliases are expanded.

    The parser builds an alias as a second reference to one node, so a few lines can stand
    for a billion values (an anchor bomb); whoever later walks or prints them pays. Each node
    records how many values it stands for, counted as it is composed, so a bomb is refused
    at the first level over the limit, before anything walks it.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._expanded: dict[int, int] = {}  # id(node) -> values it stands for, aliases expanded

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        """A node, refused when it nests too deep or stands for too many values."""
        alias = self.check_event(yaml.AliasEvent)
        if self._depth >= CONFIG_LIMITS.max_depth and not self.check_event(
            yaml.AliasEvent, yaml.ScalarEvent
        ):
            raise self._refusal(
                self.peek_event().start_mark,
                f"nested deeper than {CONFIG_LIMITS.max_depth} levels (the limit); nest lists"
                " and mappings less deeply",
            )
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if node is None:
            return None
        if not alias:
            self._count(node)
        elif id(node) not in self._expanded:
            raise self._refusal(
                node.start_mark,
                "an alias (*name) inside its own anchor never ends; refer to an anchor whose value"
                " is complete",
            )
        return node

    def _count(self, node: yaml.Node) -> None:
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        expanded = 1 + sum(self._expanded[id(child)] for child in children)
        if expanded > CONFIG_MAX_NODES:
            raise self._refusal(
                node.start_mark,
                f"with its aliases (*name) expanded, this value holds more than the limit of"
                f" {CONFIG_MAX_NODES:,} nodes; write the values out, or use fewer aliases",
            )
        self._expanded[id(node)] = expanded

    @staticmethod
    def _refusal(mark: yaml.Mark, problem: str) -> ConfigError:
        return ConfigError(f"line {mark.line + 1}: {problem}")
