"""Write ``golden_vectors.jsonl``: value -> canonical bytes -> row hash, per logical type.

Run ``python -m tests.merkle.make_golden_vectors`` only when the contract changes on
purpose: the file is the contract's memory, and both implementations are tested against
it (``--check`` reports whether the file still matches the Python implementation).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from merkle.canonical import RowEncoder
from merkle.golden import VECTORS_FILE, ltypes_of, options_of, to_python
from merkle.hashing import hash_bytes, md5_hash64

Case = tuple[list[tuple[str, Any]], dict[str, Any]]


def _single(ltype: str, values: list[Any], **options: Any) -> Iterator[Case]:
    for value in values:
        yield [(ltype, value)], options


def integer_cases() -> Iterator[Case]:
    values = [0, 1, -1, 9, 10, -10, 127, -128, 255, 32767, -32768, 65535, 2**31 - 1, -(2**31)]
    values += [2**32 - 1, 2**53, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 10**18, -(10**18)]
    values += [1234567890, None, 10**37]
    yield from _single("integer", values)


def decimal_cases() -> Iterator[Case]:
    yield from _single("decimal(10,2)", ["1.10", "0.00", "-0.00", "100.00", "-0.50", "9.99"])
    yield from _single("decimal(10,1)", ["1.1", "0.0", "-12345678.9", None])
    yield from _single("decimal(10,3)", ["1.100", "0.001", "-0.010", "1000.000"])
    yield from _single("decimal(10,0)", ["100", "0", "-7", "9999999999"])
    yield from _single("decimal(38,0)", ["99999999999999999999999999999999999999"])
    yield from _single("decimal(38,0)", ["-99999999999999999999999999999999999999"])
    yield from _single("decimal(38,38)", ["0.00000000000000000000000000000000000001"])
    yield from _single("decimal(38,18)", ["12345678901234567890.123456789012345678"])
    yield from _single("decimal(38,18)", ["0.000000000000000001", "-1.000000000000000000"])
    yield from _single("decimal(5,5)", ["0.12345", "-0.10000", "0.00000"])
    yield from _single("decimal(12,6)", ["3.141590", "3.14159", "-3.141592", "0.000100"])
    yield from _single("decimal", ["123.4500", "0", "-0.000000000000000010", "42"])
    yield from _single("decimal(20,0)", ["18446744073709551615", "-9223372036854775808"])


def float_cases() -> Iterator[Case]:
    doubles = ["0.0", "-0.0", "1.0", "-1.0", "0.1", "0.2", "0.30000000000000004", "0.3"]
    doubles += ["0.3333333333333333", "2.5", "-2.5", "1e23", "2e23", "5e-324"]
    doubles += ["2.2250738585072014e-308", "1.7976931348623157e308", "-1.7976931348623157e308"]
    doubles += ["nan", "inf", "-inf", "1e-07", "123456.789", "3.141592653589793"]
    doubles += ["9007199254740992.0", "9007199254740994.0", "1e16", "0.5", "0.75", "1.5e-10"]
    doubles += ["6.02214076e23", "-273.15", None]
    yield from _single("float64", doubles)
    for digits in (15, 12, 6, 3, 1):
        values = ["0.30000000000000004", "0.3", "123456.789", "-273.15", "0.1", "0.9999999"]
        yield from _single("float64", values, float_digits=digits)
    singles = ["0.1", "3.4028234663852886e38", "1.401298464324817e-45", "16777217.0", "1e-40"]
    singles += ["0.3333333432674408", "-2.5", "1e39", "-1e39", "nan", "0.0", "1.0000001"]
    yield from _single("float32", singles)
    yield from _single("float32", ["0.1", "123.456", "16777217.0"], float_digits=3)
    # Where the bits' decimal width changes (19 digits from bits 10**18; "-" and 19 digits
    # down to bits 2**63 + 2**63 - 10**18), which MariaDB's SQL tells by comparison.
    widths = ["7.832953389245686e-242", "7.832953389245684e-242"]
    widths += ["-5.215441032749369e+241", "-5.2154410327493695e+241"]
    yield from _single("float64", widths)


def string_cases() -> Iterator[Case]:
    texts = ["", "a", "N", "NULL", "null", "<null>", " ", "a ", " a", "tab\there", "line\nbreak"]
    texts += ["é", "e\u0301", "日本語", "😀", "a|b", "1:a", "ß", "İ", "\x00", "Σίσυφος ΟΔΟΣ"]
    texts += ["x" * 1000, "'quoted' \"double\"", "\\backslash", "\u200b", None]
    yield from _single("string", texts)
    yield from _single(
        "string", ["ABC", "Straße", "ΟΔΟΣ", "İstanbul", "MiXeD 123"], case_insensitive=True
    )
    yield from _single("string", ["", " ", "x"], empty_string_is_null=True)
    yield from _single("char", ["ab   ", "ab", "   ", " lead", "tab\t "], trim_char=True)
    yield from _single("char", ["ab   ", "ab"])
    yield from _single("char", ["   ", "ab "], trim_char=True, empty_string_is_null=True)
    yield from _single("string", ["ab   "], trim_char=True)  # only CHAR columns are trimmed


def bytes_cases() -> Iterator[Case]:
    values = ["", "00", "ff", "4e", "313a", bytes(range(256)).hex(), "00" * 4096, None]
    values += ["deadbeef", "c3a9"]
    yield from _single("bytes", values)
    yield from _single("bytes", ["", "00"], empty_string_is_null=True)


def boolean_cases() -> Iterator[Case]:
    yield from _single("boolean", [True, False, None])
    yield from _single("boolean", [1, 0, 127, -128, 2])  # TINYINT(1): not zero is true


def date_cases() -> Iterator[Case]:
    days = ["1970-01-01", "1969-12-31", "1970-01-02", "0001-01-01", "9999-12-31", "2000-02-29"]
    days += ["1900-03-01", "2038-01-19", "1582-10-15", "1582-10-04", "2024-12-31", None]
    yield from _single("date", days)
    # Where the day count's width changes (5 digits from 10,000 to 99,999 days).
    yield from _single("date", ["1997-05-18", "1997-05-19", "2243-10-16", "2243-10-17"])


def time_cases() -> Iterator[Case]:
    times = ["00:00:00", "23:59:59.999999", "12:34:56.789012", "12:34:56.5", "00:00:00.000001"]
    yield from _single("time(6)", [*times, None])
    yield from _single(
        "time(6)", ["12:34:56.5", "12:34:56.499999", "23:59:59.6"], timestamp_precision=0
    )
    yield from _single(
        "time(6)",
        ["12:34:56.5", "23:59:59.999999"],
        timestamp_precision=0,
        timestamp_rounding="truncate",
    )
    yield from _single("time(3)", ["10:00:00.9995", "10:00:00.9994"])
    durations = [-3020399000000, 3020399000000, -1000000, -1, 90000000000]
    yield from _single("time(6)", [{"duration_micros": m} for m in durations])
    yield from _single("time(6)", [{"duration_micros": -1500000}], timestamp_precision=0)


def timestamp_cases() -> Iterator[Case]:
    stamps = ["1970-01-01T00:00:00", "1969-12-31T23:59:59.999999", "1970-01-01T00:00:00.000001"]
    stamps += ["0001-01-01T00:00:00", "9999-12-31T23:59:59.999999", "2038-01-19T03:14:08"]
    stamps += ["2024-02-29T12:00:00.5", "2024-03-31T02:30:00", "2024-10-27T02:30:00", None]
    stamps += ["2020-01-01T00:00:00.123456", "2020-01-01T00:00:00.123457"]
    yield from _single("timestamp(6)", stamps)
    edge = ["1969-12-31T23:59:59.9995", "1969-12-31T23:59:59.9994", "2020-01-01T00:00:00.1235"]
    for rounding in ("round", "truncate"):
        yield from _single("timestamp(6)", edge, timestamp_precision=3, timestamp_rounding=rounding)
    for digits in range(6):
        yield from _single(
            "timestamp(6)", ["2020-06-30T23:59:59.999999"], timestamp_precision=digits
        )
    yield from _single("timestamp(3)", ["2020-01-01T00:00:00.1235", "2020-01-01T00:00:00.1234"])
    yield from _single("timestamp(0)", ["2020-01-01T00:00:00.5", "2020-01-01T00:00:00.4999"])
    # Where the microsecond count's width changes (16 digits from 10**15 to 10**16 - 1).
    widths = ["2001-09-09T01:46:39.999999", "2001-09-09T01:46:40"]
    yield from _single(
        "timestamp(6)", [*widths, "2286-11-20T17:46:39.999999", "2286-11-20T17:46:40"]
    )


def timestamp_tz_cases() -> Iterator[Case]:
    stamps = ["1970-01-01T00:00:00+00:00", "1970-01-01T01:00:00+01:00", "1969-12-31T19:00:00-05:00"]
    stamps += ["2024-03-10T02:30:00-05:00", "2024-03-31T01:59:59.999999+00:00"]
    stamps += ["2024-03-31T03:00:00+02:00", "0001-01-01T00:00:00+00:00", None]
    stamps += ["9999-12-31T23:59:59.999999+00:00", "2020-01-01T05:30:00.5+05:30"]
    yield from _single("timestamp_tz(6)", stamps)
    yield from _single("timestamp_tz(6)", ["2020-01-01T00:00:00.0005+00:00"], timestamp_precision=3)
    yield from _single("timestamp_tz(0)", ["2020-01-01T00:00:00.5-03:00"])
    # Where the microsecond count's width changes (16 digits from 10**15).
    widths = ["2001-09-09T01:46:39.999999+00:00", "2001-09-09T01:46:40+00:00"]
    yield from _single("timestamp_tz(6)", [*widths, "2001-09-09T03:46:39.999999+02:00"])


RULES = ("round", "truncate", "half_away_from_1970", "half_away_from_2000")


def rounding_cases() -> Iterator[Case]:
    """Every rounding rule on exact halves before 1970, between 1970 and 2000 (where the
    two epochs disagree) and after 2000, and on values that are not halves."""
    stamps = ["1969-12-31T23:59:59.9995", "1969-12-31T23:59:59.9994", "1969-12-31T23:59:59.9996"]
    stamps += ["1970-01-01T00:00:00.0005", "1985-01-01T00:00:00.0015", "1999-06-15T08:30:00.0005"]
    stamps += ["1999-12-31T23:59:59.9995", "2000-01-01T00:00:00.0005", "2025-03-01T12:00:00.0015"]
    stamps += ["0001-01-01T00:00:00.0005", "9999-12-31T23:59:59.9995", "1960-05-05T10:10:10.1245"]
    seconds = ["1999-06-15T08:30:00.5", "1969-12-31T23:59:59.5", "2020-01-01T00:00:00.5"]
    instants = ["1999-06-15T10:30:00.0005+02:00", "1969-12-31T23:59:59.9995+00:00"]
    times = ["12:34:56.5", "00:00:00.4999", {"duration_micros": -1500000}]
    for rule in RULES:
        yield from _single("timestamp(6)", stamps, timestamp_precision=3, timestamp_rounding=rule)
        yield from _single("timestamp(6)", seconds, timestamp_precision=0, timestamp_rounding=rule)
        yield from _single("timestamp(3)", ["1999-06-15T08:30:00.0005"], timestamp_rounding=rule)
        yield from _single(
            "timestamp_tz(6)", instants, timestamp_precision=3, timestamp_rounding=rule
        )
        yield from _single("time(6)", times, timestamp_precision=0, timestamp_rounding=rule)


def json_cases() -> Iterator[Case]:
    documents = ["{}", "[]", "null", "1", "1.0", "1e0", "-0", "2e3", "2000", '{"b":1,"a":2}']
    documents += ['{"a":2,"b":1}', '{ "a" : [1, 2, {"z": true, "y": false}] }', '"\\u00e9"']
    documents += ['"é"', '"\\u0001\\n\\t/"', "[1.50, 1.5, 1.500e0]", "12345678901234567890123"]
    documents += ['{"a":null}', "true", '"<null>"', '{"B":1,"a":2,"\\u00e9":3,"A":0}']
    documents += ["1E400", "-1.5e-10", '{"nested":{"deep":{"deeper":[[],{}]}}}', None]
    yield from _single("json", documents)


def uuid_cases() -> Iterator[Case]:
    texts = ["123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000"]
    texts += ["123e4567e89b12d3a456426614174000", "{123e4567-e89b-12d3-a456-426614174000}"]
    texts += ["urn:uuid:123e4567-e89b-12d3-a456-426614174000"]
    texts += ["00000000-0000-0000-0000-000000000000", "ffffffff-ffff-ffff-ffff-ffffffffffff", None]
    yield from _single("uuid", texts)
    yield from _single("uuid", [{"bytes": "123e4567e89b12d3a456426614174000"}])


def interval_cases() -> Iterator[Case]:
    micros = [0, 86_400_000_000, -1, 3_600_000_000, 93_784_000_005, -86_400_000_001]
    yield from _single("interval", [{"micros": m} for m in micros] + [None])
    yield from _single("interval", [{"months": m} for m in (0, 14, -1, 1200)])


def time_tz_cases() -> Iterator[Case]:
    clocks = ["00:00:00+00:00", "12:34:56.789012+05:30", "12:00:00+02:00", "11:00:00+01:00"]
    clocks += ["10:00:00+00:00", "23:59:59.999999-03:30", "00:00:00.000001+15:59:59"]
    clocks += ["12:00:00-15:59:59", "08:15:00+00:00:01", None]
    structs = [{"micros": 86_400_000_000, "offset_seconds": 0}]  # 24:00:00+00
    structs += [{"micros": 0, "offset_seconds": -50_400}, {"micros": 1, "offset_seconds": 1}]
    yield from _single("time_tz(6)", clocks + structs)
    halves = ["12:34:56.5+02:00", "12:34:56.499999+02:00", "23:59:59.6-01:00"]
    for rule in RULES:
        yield from _single("time_tz(6)", halves, timestamp_precision=0, timestamp_rounding=rule)
    yield from _single("time_tz(3)", ["10:00:00.9995+00:00", "10:00:00.9994-00:30"])
    yield from _single("time_tz(0)", ["10:00:00.5+01:00"])


def array_cases() -> Iterator[Case]:
    yield from _single("array<integer>", [[1, None, 23], [], [None], [0], [-1, 2**63 - 1], None])
    yield from _single("array<integer>", [[12, 3], [1, 23], [123], [None, None], [1, 1]])
    texts = [["a", "b"], ["a,b"], ["ab"], ["", None], [None, ""], ["N"], ["1:a"], [], None]
    texts += [["é", "日本語", "😀"], ["x" * 300]]
    yield from _single("array<string>", texts)
    yield from _single("array<string>", [["", "x", None]], empty_string_is_null=True)
    yield from _single("array<string>", [["ABC", "Straße"]], case_insensitive=True)
    yield from _single("array<char>", [["ab  ", "   ", None]], trim_char=True)
    yield from _single("array<char>", [["ab  ", "   "]], trim_char=True, empty_string_is_null=True)
    yield from _single("array<decimal(10,2)>", [["1.10", "0.00", "-0.50", None]])
    yield from _single("array<decimal>", [["123.4500", "0", "-0.000000000000000010"]])
    yield from _single("array<float64>", [["0.1", "nan", "-0.0", "inf", None]])
    yield from _single("array<float64>", [["0.30000000000000004", "-273.15"]], float_digits=3)
    yield from _single("array<float32>", [["0.1", "16777217.0"]])
    yield from _single("array<boolean>", [[True, False, None]])
    yield from _single("array<bytes>", [["00ff", "", None], ["4e"]])
    yield from _single("array<date>", [["2024-02-29", "1969-12-31", "0001-01-01", None]])
    lake_times = [{"micros": 45_296_789_012}, {"micros": 0}, None, {"micros": 86_400_000_000}]
    yield from _single("array<time(6)>", [lake_times])
    yield from _single("array<time(6)>", [[{"micros": 45_296_500_000}]], timestamp_precision=0)
    stamps = ["2020-01-01T00:00:00.123456", "1969-12-31T23:59:59.999999", None]
    yield from _single("array<timestamp(6)>", [stamps])
    for rule in RULES:
        yield from _single(
            "array<timestamp(6)>",
            [["1999-12-31T23:59:59.9995", "1985-01-01T00:00:00.0015"]],
            timestamp_precision=3,
            timestamp_rounding=rule,
        )
    yield from _single("array<timestamp_tz(6)>", [["2024-01-01T00:00:00+02:00", None]])
    yield from _single("array<json>", [['{"b":1,"a":2}', "1.0", "[]", None], []])
    yield from _single("array<uuid>", [["123e4567-e89b-12d3-a456-426614174000", None]])
    yield from _single("array<interval>", [[{"micros": 86_400_000_000}, {"micros": -1}]])
    zones = ["12:00:00+02:00", {"micros": 0, "offset_seconds": 3600}, None]
    yield from _single("array<time_tz(6)>", [zones, ["11:00:00+01:00"]])
    yield from _single("array<time_tz(6)>", [["12:34:56.5-03:30"]], timestamp_precision=0)
    nested = [[[1, 2], [], None, [None]], [[1], [2]], [[1, 2]], [], None]
    yield from _single("array<array<integer>>", nested)


def row_cases() -> Iterator[Case]:
    """Multi-column rows, including the ambiguity traps of DESIGN.md."""
    yield [("string", "a|b"), ("string", "c")], {}
    yield [("string", "a"), ("string", "b|c")], {}
    yield [("string", "ab"), ("string", "")], {}
    yield [("string", "a"), ("string", "b")], {}
    yield [("string", None), ("string", "x")], {}
    yield [("string", ""), ("string", "x")], {}
    yield [("string", "N"), ("string", "x")], {}
    yield [("string", "<null>"), ("string", "x")], {}
    yield [("string", "1:a"), ("string", None)], {}
    yield [("string", "1"), ("string", ":a")], {}
    yield [("integer", 1), ("string", "23")], {}
    yield [("integer", 12), ("string", "3")], {}
    yield [("integer", 7), ("decimal(10,2)", "1.10"), ("timestamp(6)", "2020-01-01T00:00:00")], {}
    yield [("integer", 7), ("decimal(10,1)", "1.1"), ("timestamp(6)", "2020-01-01T00:00:00")], {}
    yield [("integer", None), ("string", None), ("float64", None), ("bytes", None)], {}
    row = [("integer", 42), ("string", "Zoë"), ("float64", "0.1"), ("bytes", "00ff")]
    row += [("boolean", True), ("date", "2024-01-31"), ("uuid", "123e4567e89b12d3a456426614174000")]
    yield row, {}
    yield [("char", "x  "), ("string", "y")], {"trim_char": True, "case_insensitive": True}
    yield [("json", '{"b":[1,2],"a":"x"}'), ("interval", {"micros": 5})], {}
    yield [("array<string>", ["a"]), ("array<string>", ["b"])], {}
    yield [("array<string>", ["a", "b"]), ("array<string>", [])], {}
    yield [("array<string>", []), ("array<string>", ["a", "b"])], {}
    yield [("array<string>", None), ("array<string>", [])], {}
    yield [("integer", 1), ("array<integer>", [2, 3]), ("time_tz(6)", "12:00:00+02:00")], {}


GROUPS = [
    ("integer", integer_cases),
    ("decimal", decimal_cases),
    ("float", float_cases),
    ("string", string_cases),
    ("bytes", bytes_cases),
    ("boolean", boolean_cases),
    ("date", date_cases),
    ("time", time_cases),
    ("timestamp", timestamp_cases),
    ("timestamp_tz", timestamp_tz_cases),
    ("rounding", rounding_cases),
    ("json", json_cases),
    ("uuid", uuid_cases),
    ("interval", interval_cases),
    ("time_tz", time_tz_cases),
    ("array", array_cases),
    ("row", row_cases),
]


def build_vectors() -> list[dict[str, Any]]:
    """Every vector, with canonical bytes and hash from the Python implementation."""
    vectors = []
    for group, cases in GROUPS:
        for number, (columns, options) in enumerate(cases(), start=1):
            vector: dict[str, Any] = {"id": f"{group}-{number:03d}"}
            if options:
                vector["options"] = options
            vector["columns"] = [{"type": t, "value": v} for t, v in columns]
            encoder = RowEncoder(ltypes_of(vector), options_of(vector))
            values = [
                to_python(lt, c["value"])
                for lt, c in zip(ltypes_of(vector), vector["columns"], strict=True)
            ]
            data = encoder.to_bytes(values)
            vector["canonical"] = data.hex()
            vector["row_hash"] = hash_bytes(data)
            vector["row_hash_md5"] = md5_hash64(data)
            vectors.append(vector)
    return vectors


def main(argv: list[str]) -> int:
    """Write the vectors, or with ``--check`` compare them with the file."""
    lines = [json.dumps(v, ensure_ascii=False) for v in build_vectors()]
    text = "\n".join(lines) + "\n"
    path = Path(__file__).parents[2] / "merkle" / VECTORS_FILE
    if "--check" in argv:
        same = path.read_text(encoding="utf-8") == text
        print("golden vectors up to date" if same else "golden vectors differ")
        return 0 if same else 1
    path.write_text(text, encoding="utf-8")
    print(f"wrote {len(lines)} vectors to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
