"""What an ``ALTER TABLE`` does to stored rows: the DDL policy of the MariaDB source.

The binlog shows DDL as statements, not as row events, so a statement that rewrites stored
values (a default filled into existing rows, a converting ``MODIFY``, ``CONVERT TO
CHARACTER SET``) leaves the lake stale unless the pipeline reacts. Each clause of an
``ALTER TABLE`` is classified (https://mariadb.com/kb/en/alter-table/):

- ``schema``: stored values cannot change — a nullable column added without a default,
  indexes, foreign keys and checks, a column's default for *future* rows (``ALTER COLUMN ...
  SET DEFAULT``), table options (engine, comment, row format, the table's default charset),
  adding or reorganising partitions;
- ``refresh`` (``cdc_core.ddl.table_refresh``): anything that can change stored values or the
  row key — a column added with a default, ``NOT NULL`` (an implicit default),
  ``AUTO_INCREMENT``, a generated expression or an implicit ``TIMESTAMP`` default;
  ``MODIFY``/``CHANGE``/``RENAME COLUMN``; ``DROP COLUMN``; ``CONVERT TO``; primary key
  changes; ``DROP``/``TRUNCATE``/``EXCHANGE PARTITION``; ``ALTER IGNORE`` (it deletes
  duplicate rows); and every clause not recognised here.

Whatever else the statement did, a refresh re-reads the table. One kind of clause is
refused (``stop``): a foreign key with a cascading action (``ON DELETE``/``ON UPDATE``
``CASCADE``, ``SET NULL``, ``SET DEFAULT``), as a constraint or inline in a column's
definition: InnoDB changes the child rows of a cascade without logging them, so the table
could no longer be followed (``table_kinds``, which refuses such tables before loading).
"""

from __future__ import annotations

import re

from cdc_core.capture.source import DdlAction

_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|`(?:[^`]|``)*`", re.S)

# Clauses that cannot change a stored value (matched at the clause's start).
_PRESERVING = re.compile(
    r"""^(?:
        ADD\s+(?:CONSTRAINT|FOREIGN|INDEX|KEY|FULLTEXT|SPATIAL|CHECK|PERIOD|SYSTEM\s+VERSIONING)\b
      | ADD\s+PARTITION\b
      | DROP\s+(?:INDEX|KEY|FOREIGN|CONSTRAINT|CHECK)\b
      | ALTER\s+(?:COLUMN\s+)?\S+\s+(?:SET|DROP)\s+DEFAULT\b
      | ALTER\s+(?:INDEX|KEY)\b
      | RENAME\s+(?:INDEX|KEY)\b
      | (?:DEFAULT\s+)?(?:CHARACTER\s+SET|CHARSET|COLLATE)\b
      | (?:ENGINE|COMMENT|AUTO_INCREMENT|ROW_FORMAT|KEY_BLOCK_SIZE|ALGORITHM|LOCK|STATS_\w+
         |CHECKSUM|PACK_KEYS|MAX_ROWS|MIN_ROWS|AVG_ROW_LENGTH|DELAY_KEY_WRITE|PAGE_\w+
         |TRANSACTIONAL|ENCRYPTED|ENCRYPTION_KEY_ID|IETF_QUOTES|SEQUENCE|INSERT_METHOD)\b
      | (?:FORCE|ENABLE\s+KEYS|DISABLE\s+KEYS|ORDER\s+BY|WAIT\s+\d+|NOWAIT)\b
      | (?:ANALYZE|CHECK|OPTIMIZE|REPAIR|REBUILD|COALESCE|REORGANIZE)\s+PARTITION\b
      | PARTITION\s+BY\b | REMOVE\s+PARTITIONING\b
    )""",
    re.I | re.X,
)
_ADD_INDEX_LIKE = re.compile(r"^ADD\s+(?:UNIQUE|PRIMARY)\b", re.I)
_ADD_COLUMN = re.compile(r"^ADD\s+(?:COLUMN\s+)?(?:IF\s+NOT\s+EXISTS\s+)?", re.I)
# In a new column's definition: what fills existing rows with something other than NULL.
_FILLS_ROWS = re.compile(
    r"\bNOT\s+NULL\b|\bAUTO_INCREMENT\b|\bSERIAL\b|\bGENERATED\b|\bAS\s*\(|\bDEFAULT\b",
    re.I,
)
# A foreign key whose action changes child rows unlogged (``table_kinds.CASCADING``).
_CASCADING_ACTION = re.compile(
    r"\bON\s+(?:DELETE|UPDATE)\s+(?:CASCADE|SET\s+NULL|SET\s+DEFAULT)\b", re.I
)
_REFERENCES = re.compile(r"\bREFERENCES\s+([^\s(]+)", re.I)
_CONSTRAINT = re.compile(
    r"^ADD\s+CONSTRAINT\s+(?:IF\s+NOT\s+EXISTS\s+)?(?!FOREIGN\b)([^\s(]+)", re.I
)
_DEFAULT_NULL = re.compile(r"\bDEFAULT\s+NULL\b", re.I)
_TIMESTAMP = re.compile(r"^\S+\s+TIMESTAMP\b", re.I)
_EXPLICIT_NULL = re.compile(r"(?<!NOT)\s+NULL\b", re.I)


def _masked(sql: str) -> str:
    """``sql`` with quoted strings and identifiers blanked, so their contents are not read
    as keywords or separators (a column named `DEFAULT`, a default of 'a,b')."""
    return _QUOTED.sub(lambda match: "Q" * len(match[0]), sql)


def split_clauses(specification: str) -> list[str]:
    """The comma-separated clauses of an ``ALTER TABLE`` specification (commas inside
    parentheses, quotes and identifiers do not separate)."""
    masked = _masked(specification)
    clauses, depth, start = [], 0, 0
    for index, char in enumerate(masked):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            clauses.append(specification[start:index].strip())
            start = index + 1
    clauses.append(specification[start:].strip())
    return [clause for clause in clauses if clause]


def _added_column_fills_rows(definition: str) -> bool:
    """Whether a column added with ``definition`` (``name type ...``) gets a non-NULL value
    in existing rows. A TIMESTAMP without an explicit ``NULL`` may be NOT NULL with an
    implicit default (``explicit_defaults_for_timestamp=OFF``)."""
    masked = _masked(definition)
    if _FILLS_ROWS.search(_DEFAULT_NULL.sub(" ", masked)):
        return True
    return bool(_TIMESTAMP.match(masked)) and not _EXPLICIT_NULL.search(masked)


def _clause_reason(clause: str) -> str | None:
    """Why a clause may change stored values (None: it cannot)."""
    masked = _masked(clause).strip()
    if _PRESERVING.match(masked):
        return None
    if _ADD_INDEX_LIKE.match(masked):
        return None if masked.upper().startswith("ADD UNIQUE") else "the primary key changes"
    if added := _ADD_COLUMN.match(masked):
        definitions = clause[added.end() :].strip()
        listed = definitions.startswith("(")  # ADD COLUMN (a INT, b INT)
        parts = split_clauses(definitions[1:-1]) if listed else [definitions]
        if any(_added_column_fills_rows(part) for part in parts):
            return "a column added with a value for existing rows"
        return None
    first = masked.split(None, 1)[0].upper() if masked else ""
    return {
        "MODIFY": "a column's type or definition changes",
        "CHANGE": "a column's name, type or definition changes",
        "DROP": "a column, the primary key or partition rows go",
        "RENAME": "a column is renamed",
        "CONVERT": "stored text is converted to another character set",
        "TRUNCATE": "partition rows are deleted",
        "EXCHANGE": "partition rows are exchanged",
    }.get(first, f"an ALTER TABLE clause replcheck does not know ({first or 'empty'})")


def cascading_reference(clause: str) -> str | None:
    """What a clause adding a cascading foreign key adds (its constraint, parent and
    actions, as the statement writes them); None for any other clause."""
    masked = _masked(clause)
    references = _REFERENCES.search(masked)
    actions = [match.span() for match in _CASCADING_ACTION.finditer(masked)]
    if references is None or not actions:
        return None
    constraint = _CONSTRAINT.match(masked.strip())
    named = f"{clause.strip()[slice(*constraint.span(1))]} " if constraint else ""
    parent = clause[slice(*references.span(1))]
    shown = " ".join(" ".join(clause[slice(*span)].split()) for span in actions)
    return f"the foreign key {named}({shown}) referencing {parent}"


def classify_alter(specification: str, *, ignore: bool = False) -> tuple[DdlAction, str]:
    """The action an ``ALTER TABLE`` needs, and why (see the module doc).

    Args:
        specification: What follows the table name (the clauses).
        ignore: ``ALTER IGNORE TABLE``: rows violating a new unique key are deleted.
    """
    clauses = split_clauses(specification)
    cascading = [added for clause in clauses if (added := cascading_reference(clause))]
    if cascading:
        return "stop", _cascade_refusal(cascading)
    if ignore:
        return "refresh", "ALTER IGNORE may delete rows"
    reasons = [reason for clause in clauses if (reason := _clause_reason(clause))]
    if reasons:
        return "refresh", "; ".join(dict.fromkeys(reasons))
    return "schema", "value-preserving"


def _cascade_refusal(added: list[str]) -> str:
    return (
        f"{' and '.join(added)} added to a captured table: InnoDB changes the child rows of"
        " a cascade without writing them to the binlog, so the lake would keep deleted rows"
        " and old values; leave the table out of the pipeline's tables (to capture it again,"
        " drop the cascading action at the source, delete or update the child rows"
        " explicitly in the application, and load the table with a new pipeline)"
    )
