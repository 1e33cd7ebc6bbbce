"""Datetime text as LogMiner renders it under any session format: zone regions in Oracle's
upper case, offsets, daylight abbreviations, fractions of 0 to 9 digits (exact values)."""

from __future__ import annotations

import datetime as dt

import pytest

from connectors.oracle.logminer.datetimes import (
    TIMESTAMP_TZ_FORMAT,
    AmbiguousLocalTimeError,
    DatetimeTextError,
    parse_datetime,
)
from connectors.oracle.logminer.redo_parser import parse_redo
from connectors.oracle.logminer.redo_values import row_images
from tests.connectors.oracle.harness import DATA
from tests.connectors.oracle.replay import load_tables

TABLES = load_tables(DATA / "corpus_tables.json")
TZ = TIMESTAMP_TZ_FORMAT


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, us, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "model", "instant"),
    [
        # TZR as Oracle prints it: upper case (summer and winter offsets of the region).
        ("2026-05-01 10:00:00.123456 EUROPE/BERLIN", "YYYY-MM-DD HH24:MI:SS.FF TZR",
         utc(2026, 5, 1, 8, 0, 0, 123456)),
        ("2026-01-15 10:00:00.5 EUROPE/BERLIN", TZ, utc(2026, 1, 15, 9, 0, 0, 500000)),
        ("2026-07-01 12:00:00.000000 AMERICA/NEW_YORK", TZ, utc(2026, 7, 1, 16)),
        ("2026-12-01 12:00:00.0 US/PACIFIC", TZ, utc(2026, 12, 1, 20)),
        ("2026-12-01 12:00:00.0 ETC/GMT+5", TZ, utc(2026, 12, 1, 17)),
        ("2026-12-01 12:00:00.0 utc", TZ, utc(2026, 12, 1, 12)),
        ("2026-12-01 12:00:00.0 Asia/Kolkata", TZ, utc(2026, 12, 1, 6, 30)),
        # TZR holding an offset (a value stored with an offset prints it as its region).
        ("2026-05-01 10:00:00 +02:00", "YYYY-MM-DD HH24:MI:SS TZR", utc(2026, 5, 1, 8)),
        # TZH:TZM, TZH alone, negative offsets under one hour.
        ("2026-05-01 10:00:00.0 -03:30", TZ, utc(2026, 5, 1, 13, 30)),
        ("2021-01-01 00:00:00.0 -00:30", TZ, utc(2021, 1, 1, 0, 30)),
        ("2026-05-01 10:00:00 +05", "YYYY-MM-DD HH24:MI:SS TZH", utc(2026, 5, 1, 5)),
        # TZR TZD: the abbreviation picks the side of Berlin's overlap on 2026-10-25.
        ("2026-10-25 02:30:00.000000 EUROPE/BERLIN CEST", "YYYY-MM-DD HH24:MI:SS.FF TZR TZD",
         utc(2026, 10, 25, 0, 30)),
        ("2026-10-25 02:30:00.000000 EUROPE/BERLIN CET", "YYYY-MM-DD HH24:MI:SS.FF TZR TZD",
         utc(2026, 10, 25, 1, 30)),
        ("2026-10-25 02:30:00.000000 EUROPE/BERLIN CET", TZ, utc(2026, 10, 25, 1, 30)),
        # Outside an overlap the region alone decides, whatever abbreviation Oracle's zone
        # file prints.
        ("2026-07-01 12:00:00 EUROPE/BERLIN XYZ", "YYYY-MM-DD HH24:MI:SS TZR TZD",
         utc(2026, 7, 1, 10)),
        # Fractions of 0 to 9 digits: none (TIMESTAMP(0) prints "SS."), no radix at all, and
        # digits beyond microseconds truncated.
        ("2026-05-01 10:00:00. +00:00", TZ, utc(2026, 5, 1, 10)),
        ("2026-05-01 10:00:00 +00:00", TZ, utc(2026, 5, 1, 10)),
        ("2026-05-01 10:00:00.1 +00:00", TZ, utc(2026, 5, 1, 10, 0, 0, 100000)),
        ("2026-05-01 10:00:00.123456789 EUROPE/BERLIN", TIMESTAMP_TZ_FORMAT,
         utc(2026, 5, 1, 8, 0, 0, 123456)),
        ("2026-05-01 10:00:00.999999999 +00:00", "YYYY-MM-DD HH24:MI:SS.FF9 TZH:TZM",
         utc(2026, 5, 1, 10, 0, 0, 999999)),
        ("2026-05-01 10:00:00.123 +00:00", "YYYY-MM-DD HH24:MI:SS.FF3 TZH:TZM",
         utc(2026, 5, 1, 10, 0, 0, 123000)),
        # X, the radix character, in either form.
        ("2026-05-01 10:00:00,25 UTC", "YYYY-MM-DD HH24:MI:SSXFF TZR",
         utc(2026, 5, 1, 10, 0, 0, 250000)),
    ],
)  # fmt: skip
def test_zoned_text_gives_the_exact_instant(text: str, model: str, instant: dt.datetime) -> None:
    value = parse_datetime(text, model)
    assert value.utcoffset() is not None
    assert value.astimezone(dt.UTC) == instant
    assert value.astimezone(dt.UTC).microsecond == instant.microsecond


def test_naive_text_with_any_fraction_width() -> None:
    model = "YYYY-MM-DD HH24:MI:SS.FF"
    assert parse_datetime("2020-02-01 00:00:00.", model) == dt.datetime(2020, 2, 1)
    assert parse_datetime("2020-02-01 00:00:00.000000001", model) == dt.datetime(2020, 2, 1)
    assert parse_datetime("2020-02-01 00:00:00.12", model) == dt.datetime(
        2020, 2, 1, 0, 0, 0, 120000
    )
    assert parse_datetime("2020-02-01 00:00:00.12", model).tzinfo is None


@pytest.mark.parametrize(
    ("text", "model", "error", "message"),
    [
        ("2026-10-25 02:30:00 EUROPE/BERLIN", "YYYY-MM-DD HH24:MI:SS TZR",
         AmbiguousLocalTimeError, "DST overlap"),
        ("2026-10-25 02:30:00 EUROPE/BERLIN PDT", "YYYY-MM-DD HH24:MI:SS TZR TZD",
         AmbiguousLocalTimeError, "DST overlap"),
        ("2026-03-29 02:30:00 EUROPE/BERLIN", "YYYY-MM-DD HH24:MI:SS TZR",
         DatetimeTextError, "DST gap"),
        ("2026-05-01 10:00:00 CST", "YYYY-MM-DD HH24:MI:SS TZD", DatetimeTextError, "TZD"),
        ("2026-05-01 10:00:00 MARS/OLYMPUS", "YYYY-MM-DD HH24:MI:SS TZR",
         DatetimeTextError, "unknown time zone region"),
        ("2026-05-01 10:00", "YYYY-MM-DD HH24:MI:SS TZR", DatetimeTextError, "does not match"),
    ],
)  # fmt: skip
def test_text_no_instant_fits_is_refused(
    text: str, model: str, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        parse_datetime(text, model)


def test_redo_values_in_upper_case_regions_and_other_masks() -> None:
    sql = (
        'insert into "DEBEZIUM"."ALLTYPES"("ID","TSTZ","TSLTZ") values (\'1\','
        "TO_TIMESTAMP_TZ('2026-05-01 10:00:00.123456789 EUROPE/BERLIN'),"
        "TO_TIMESTAMP_TZ('2026-10-25 02:30:00.5 EUROPE/BERLIN CET',"
        " 'YYYY-MM-DD HH24:MI:SS.FF TZR TZD'));"
    )
    after = row_images(parse_redo(sql), TABLES["DEBEZIUM.ALLTYPES"]).after
    assert after is not None
    assert after["TSTZ"] == utc(2026, 5, 1, 8, 0, 0, 123456)
    assert after["TSLTZ"] == utc(2026, 10, 25, 1, 30, 0, 500000)
    assert isinstance(after["TSTZ"], dt.datetime) and after["TSTZ"].tzinfo is dt.UTC
