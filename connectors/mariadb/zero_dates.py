"""Zero and partial dates: the one policy every reader of MariaDB values applies.

Unless ``sql_mode`` has ``NO_ZERO_DATE``, ``NO_ZERO_IN_DATE`` and strict mode, MariaDB
stores DATE and DATETIME values that are not calendar dates: the zero date ``'0000-00-00'``
(``'0000-00-00 00:00:00'``), dates with a zero month or day (``'2024-00-15'``,
``'2024-01-00'``), year 0 (``'0000-01-15'``) and, with ``ALLOW_INVALID_DATES``, a day past
the end of its month (``'2023-02-31'``) (https://mariadb.com/kb/en/date/,
https://mariadb.com/kb/en/sql-mode/). A TIMESTAMP is an instant or the zero value, stored
as 0 seconds; its range starts at 1970-01-01 00:00:01 UTC, so it has no partial values
(https://mariadb.com/kb/en/timestamp/).

The policy, applied alike by the snapshot reader (``connector``), the binlog decoder
(``binlog_values`` + ``row_changes``), MINIMAL images' defaults (``missing_columns``), the
JDBC read (``jdbc``) and the SQL digests (``pushdown``):

- **Zero is NULL.** A value whose every part is zero (date, time and fraction) reads as
  NULL, so a source holding ``'0000-00-00'`` and a copy holding NULL are in sync. MariaDB
  itself finds the zero date of a NOT NULL column with ``IS NULL``, which it rewrites to
  ``column = 0`` (MDEV-14911, https://jira.mariadb.org/browse/MDEV-14911), and Connector/J
  reads it as NULL with ``zeroDateTimeBehavior=CONVERT_TO_NULL``. (Debezium reads it as
  1970-01-01 in NOT NULL columns, which a real 1970-01-01 could not be told from.)
- **Anything else that is not a calendar date is refused** with
  ``UnrepresentableDateError``, naming table, column and the row's key: neither Python nor
  Arrow nor the hash contract has such a date, and reading it as NULL would hide it.
"""

from __future__ import annotations

import datetime as dt
from typing import Final

from cdc_core.errors import TerminalError
from merkle import types as lt

# The logical types of DATE and DATETIME, which may hold any of these values, and of all
# three (TIMESTAMP can only be zero).
REFUSABLE_TYPES = (lt.DateType, lt.TimestampType)
DATED_TYPES = (*REFUSABLE_TYPES, lt.TimestampTzType)


class _NotADate:
    """The type of ``NOT_A_DATE``: a stored date that is not zero and not a calendar date."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_A_DATE"


NOT_A_DATE: Final = _NotADate()
"""What a decoder gives for a refused value, until the caller, who knows the row's key,
raises ``UnrepresentableDateError``."""

_ZERO_TEXT = frozenset("0-: .")


def from_text(text: str) -> _NotADate | None:
    """What a DATE, DATETIME or TIMESTAMP the driver returned as text reads as: pymysql
    returns every value it cannot make a ``date``/``datetime`` of as its text."""
    return None if set(text) <= _ZERO_TEXT else NOT_A_DATE


def to_date(year: int, month: int, day: int) -> dt.date | _NotADate | None:
    """The value of a stored DATE's parts (None: the zero date)."""
    try:  # a calendar date, nearly every value, first (the zero date is none)
        return dt.date(year, month, day)
    except ValueError:
        return None if not (year or month or day) else NOT_A_DATE


def to_datetime(
    day: tuple[int, int, int], time: tuple[int, int, int], micros: int
) -> dt.datetime | _NotADate | None:
    """The value of a stored DATETIME's parts (None: the zero datetime)."""
    try:  # a calendar date, nearly every value, first (the zero datetime is none)
        return dt.datetime(*day, *time, micros)
    except ValueError:
        return None if not (any(day) or any(time) or micros) else NOT_A_DATE


def zero_sql(ref: str) -> str:
    """SQL true when the DATE, DATETIME or TIMESTAMP ``ref`` is the zero value (MariaDB's
    own rewrite of ``IS NULL`` for it, MDEV-14911)."""
    return f"{ref} = 0"


def refused_sql(ref: str) -> str:
    """SQL true when the DATE or DATETIME ``ref`` is neither NULL, zero nor a calendar date.

    Only the parts are read (``MONTH``, ``DAYOFMONTH``, ``LAST_DAY``) and the value is
    compared with a date, never converted: a conversion's result on such values depends on
    the session's ``sql_mode`` (``LAST_DAY`` of a day 0 too, hence the day is tested first).
    The test is ordered so a calendar date, nearly every value, costs three cheap steps:
    year 1 or later (``>= '0001-01-01'`` once month and day are not 0), a month, and a day
    from 1 to 28; only days 29 to 31 ask ``LAST_DAY``, and only non-calendar dates whether
    they are zero (``AND`` stops at its first false operand).
    """
    day = f"DAYOFMONTH({ref})"
    calendar = (
        f"{ref} >= '0001-01-01' AND MONTH({ref}) > 0"
        f" AND ({day} BETWEEN 1 AND 28 OR ({day} > 0 AND {day} <= DAYOFMONTH(LAST_DAY({ref}))))"
    )
    return f"(NOT COALESCE({calendar}, FALSE) AND {ref} <> 0)"


class UnrepresentableDateError(TerminalError):
    """A DATE or DATETIME value that is neither zero nor a calendar date (see the module)."""

    @staticmethod
    def around_key(table: str, column: str) -> tuple[str, str]:
        """The message's text before and after the row's key (``connectors.base.key_text``),
        so that Spark can build the same message around a key it formats itself."""
        before = f"column {column} of table {table}, in the row with key ("
        after = (
            "), holds a date that is not a calendar date (a month or day of 0, year 0, or a"
            " day past the end of its month); replcheck reads only the zero date as NULL."
            " Fix: update it at the source to a real date or NULL (a pipeline stopped by a"
            " logged change then needs the table loaded again from a new snapshot), or"
            " leave the column out of the comparison (columns.exclude)"
        )
        return before, after

    @classmethod
    def of(
        cls, table: str, column: str, key: str, position: str | None = None
    ) -> UnrepresentableDateError:
        """The error for ``column`` of the row whose key reads ``key`` (at ``position``,
        for a change read from the log)."""
        before, after = cls.around_key(table, column)
        context = {"table": table, "column": column, "key": key}
        return cls(before + key + after, context | ({"position": position} if position else {}))
