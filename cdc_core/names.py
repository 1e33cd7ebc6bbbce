"""Table and column names: one text form, one lake path form, one engine quoting.

**Canonical table name.** A table is ``schema.table`` (or a bare ``table`` where the
product or the URL supplies the schema). A part is written bare unless it contains ``.`` or
``"``, is empty, or starts or ends with a space; then it is double-quoted with every ``"``
doubled, as in standard SQL: ``shop.order-lines``, ``shop."v1.2"``, ``"a""b".t``. Parsing
splits on dots outside double quotes and takes bare parts exactly (case and inner spaces
kept: the canonical form never folds case, whatever the product does with unquoted SQL
names). This one form is used in configuration files, ``RowChange.table``, messages,
results and reports; every product's SQL quoting (``quote`` in each ``connectors/<product>``
folder) takes the parsed parts.

**Lake directories.** Each part becomes one directory name (``to_lake_dir``), injectively:

- ``A-Z a-z 0-9 _ -`` stay as they are, so lakes written before this encoding stay readable;
- every other character becomes ``~`` and two upper-case hex digits per UTF-8 byte
  (``my table`` -> ``my~20table``, ``données`` -> ``donn~C3~A9es``, ``a=b`` -> ``a~3Db``);
- the empty part is ``~``; a part spelled ``_replcheck`` in any case starts with ``~5F``,
  so no table meets the lake's own ``_replcheck`` folder (even on a case-insensitive disk);
- a result longer than 240 bytes (file systems take 255) is cut at an escape boundary
  to 200 bytes and followed by ``~~`` and 32 hex digits of the name's SHA-256; ``~~``
  never occurs otherwise, so this stays injective barring a SHA-256 collision.

Why so strict: delta-rs percent-encodes the table root in ``DeltaTable.file_uris()``
(space, ``%``, ``#``, ``?``, non-ASCII) and Spark reads such a URI as a literal path that
does not exist; Hadoop expands ``?*[]{}`` in paths as globs; delta-rs cannot even open a
table under ``[``; Spark takes ``k=v`` directories for Hive partitions; a leading ``.`` or
``_`` marks hidden files for Hadoop. The escaped alphabet avoids all of these.

**Columns.** deltalake 1.x writes, merges and reads back every column name unchanged
(spaces, ``,;{}()=\\n\\t``, dots, quotes, backticks, non-ASCII, the empty name; checked in
``tests/cdc_core/test_names_lake.py``), and Spark reads them from the Parquet files, so
lake columns carry the source's names as they are. Two exceptions are refused by
``cdc_core.capture.source.TableDescription``: names that differ only in case (Delta column names
are case-insensitive) and names of the lake's bookkeeping columns (``_op``, ...).
Expressions of Spark SQL and of delta-rs (DataFusion) name a column with
``backtick_quote``: Spark parses dots in a bare column string as struct access, and
delta-rs' own ``*_all`` merge clauses do not escape backticks (so the sink and the
re-sync list the columns themselves: ``merge_assignments``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cdc_core.errors import ConfigError

# The lake's bookkeeping columns beside a table's own (cdc_core.lake.layout): a source column may
# not take one of these names.
OP = "_op"
COMMIT_POS = "_commit_pos"
SEQ = "_seq"
TXID = "_txid"
COMMIT_TS = "_commit_ts"
META_COLUMNS = (OP, COMMIT_POS, SEQ, TXID, COMMIT_TS)
# A table without a key is located by all its columns; equal rows are told apart by their
# copy number, 0 to n - 1 for n equal rows, a column of the lake only (cdc_core.rebuild.copies).
COPY = "_copy"

_BARE_DIR = re.compile(r"[A-Za-z0-9_-]")
_ESCAPE = "~"
_RESERVED_DIR = "_replcheck"  # the lake's own folder (cdc_core.lake.layout)
_MAX_DIR_BYTES = 240
_CUT_DIR_BYTES = 200


@dataclass(frozen=True, slots=True)
class TableName:
    """A table's name as parts, exactly as the database stores them.

    Args:
        name: The table.
        schema: Its schema (database, owner); ``None`` when the name was unqualified.
    """

    name: str
    schema: str | None = None

    @property
    def parts(self) -> tuple[str, ...]:
        """The parts, outermost first."""
        return (self.name,) if self.schema is None else (self.schema, self.name)

    def with_default_schema(self, schema: str) -> TableName:
        """This name, qualified with ``schema`` when it has none."""
        return self if self.schema is not None else TableName(self.name, schema)

    def __str__(self) -> str:
        return ".".join(format_part(part) for part in self.parts)


def format_part(part: str) -> str:
    """One part in the canonical form: bare, or double-quoted when it must be."""
    if part and "." not in part and '"' not in part and part == part.strip(" "):
        return part
    return '"' + part.replace('"', '""') + '"'


def format_table(schema: str | None, name: str) -> str:
    """The canonical text of a table name."""
    return str(TableName(name, schema))


def parse_table(text: str) -> TableName:
    """The parts of a canonical table name.

    Raises:
        ConfigError: The text is not one or two parts (the message names the fix).
    """
    parts = _split_parts(text)
    if len(parts) > 2:
        raise ConfigError(
            f"table name {text!r} has {len(parts)} dot-separated parts; a table is"
            ' schema.table: double-quote a part that holds a dot, e.g. shop."v1.2"',
            {"table": text},
        )
    return TableName(parts[-1], parts[0] if len(parts) == 2 else None)


def same_table(one: str, other: str) -> bool:
    """Whether two canonical names name one table, a name without a schema standing for
    the table of that name in the default schema (``t`` and ``shop.t``)."""
    first, second = parse_table(one), parse_table(other)
    schemas = {first.schema, second.schema} - {None}
    return first.name == second.name and len(schemas) <= 1


def split_table(text: str, default_schema: str) -> tuple[str, str]:
    """``(schema, table)`` of a canonical name; an unqualified name is in ``default_schema``."""
    parsed = parse_table(text)
    return parsed.schema if parsed.schema is not None else default_schema, parsed.name


def qualify(text: str, default_schema: str) -> str:
    """The canonical text of ``text`` with ``default_schema`` when it names none."""
    return str(parse_table(text).with_default_schema(default_schema))


def _split_parts(text: str) -> list[str]:
    parts: list[str] = []
    position = 0
    while True:
        part, position = _read_part(text, position)
        parts.append(part)
        if position == len(text):
            return parts
        position += 1  # the dot


def _read_part(text: str, start: int) -> tuple[str, int]:
    """The part starting at ``start`` and the index just after it (a dot or the end)."""
    if text.startswith('"', start):
        return _read_quoted(text, start)
    end = text.find(".", start)
    end = len(text) if end < 0 else end
    part = text[start:end]
    if '"' in part:
        raise _bad_name(text, 'a bare part holds a ", which needs the part double-quoted')
    return part, end


def _read_quoted(text: str, start: int) -> tuple[str, int]:
    chars: list[str] = []
    index = start + 1
    while index < len(text):
        if text[index] != '"':
            chars.append(text[index])
            index += 1
        elif text.startswith('""', index):
            chars.append('"')
            index += 2
        elif index + 1 == len(text) or text[index + 1] == ".":
            return "".join(chars), index + 1
        else:
            raise _bad_name(text, "a quoted part must end at a dot or the end of the name")
    raise _bad_name(text, 'a quoted part has no closing "')


def _bad_name(text: str, why: str) -> ConfigError:
    return ConfigError(
        f'table name {text!r} cannot be read: {why} (write parts holding . or " as'
        ' "..." with each " doubled)',
        {"table": text},
    )


def to_lake_dir(part: str) -> str:
    """The directory name of one table name part (see the module docstring)."""
    if not part:
        return _ESCAPE
    escaped = "".join(_escape_char(char) for char in part)
    if part.lower() == _RESERVED_DIR:
        escaped = _escape_char("_", force=True) + escaped[1:]
    if len(escaped.encode()) <= _MAX_DIR_BYTES:
        return escaped
    digest = hashlib.sha256(part.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return _cut_at_escape(escaped) + _ESCAPE * 2 + digest


def _escape_char(char: str, force: bool = False) -> str:
    if not force and _BARE_DIR.fullmatch(char):
        return char
    return "".join(f"{_ESCAPE}{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))


def _cut_at_escape(escaped: str) -> str:
    cut = escaped[:_CUT_DIR_BYTES]
    tail = cut.rfind(_ESCAPE)
    return cut[:tail] if tail > len(cut) - 3 else cut


def from_lake_dir(directory: str) -> str:
    """The part a directory name encodes (the inverse of ``to_lake_dir``).

    Raises:
        ValueError: The name is not an encoding, or is a hashed (over-long) one.
    """
    if directory == _ESCAPE:
        return ""
    if _ESCAPE * 2 in directory:
        raise ValueError(f"directory {directory!r} holds a shortened name; it cannot be decoded")
    pieces = re.split(r"((?:~[0-9A-F]{2})+)", directory)
    decoded = []
    for piece in pieces:
        if piece.startswith(_ESCAPE):
            decoded.append(
                bytes.fromhex(piece.replace(_ESCAPE, "")).decode("utf-8", "surrogatepass")
            )
        elif piece and not all(_BARE_DIR.fullmatch(char) for char in piece):
            raise ValueError(f"directory {directory!r} is not a lake name encoding")
        else:
            decoded.append(piece)
    return "".join(decoded)


def is_glob(pattern: str) -> bool:
    """Whether a table pattern holds shell glob characters (``fnmatch``)."""
    return any(char in pattern for char in "*?[")


def backtick_quote(column: str) -> str:
    """A column reference for Spark SQL / DataFrame strings and delta-rs predicates.

    Both parse ``name`` with backticks as one identifier and a doubled backtick as a
    backtick (https://spark.apache.org/docs/latest/sql-ref-identifier.html); unquoted, Spark
    would read ``a.b`` as field ``b`` of struct ``a``.
    """
    return "`" + column.replace("`", "``") + "`"


def merge_key_predicate(key: Sequence[str], *, nullable: bool = False) -> str:
    """The delta-rs MERGE condition matching target ``t`` and source ``s`` rows by ``key``;
    ``nullable``: key parts may be NULL (all the columns of a table without a key), and
    NULL matches NULL."""
    if nullable:  # parenthesised: delta-rs binds AND tighter than IS NOT DISTINCT FROM
        return " AND ".join(f"(t.{q} IS NOT DISTINCT FROM s.{q})" for q in map(backtick_quote, key))
    return " AND ".join(f"t.{q} = s.{q}" for q in map(backtick_quote, key))


def merge_assignments(columns: Sequence[str]) -> dict[str, str]:
    """Every column set from source ``s``, for delta-rs' ``when_matched_update`` and
    ``when_not_matched_insert``: its ``*_all`` clauses quote names without escaping
    backticks (deltalake 1.x), so a column holding one fails to parse."""
    return {q: f"s.{q}" for q in map(backtick_quote, columns)}
