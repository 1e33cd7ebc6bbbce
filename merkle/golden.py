"""Golden vectors: the hash contract's memory, replayed through each implementation.

``golden_vectors.jsonl`` (shipped with the package, so an installation can check its own
engines: ``replcheck check-contract``) holds one row per line::

    {"id": "decimal-003", "options": {...}, "columns": [{"type": "decimal(10,2)",
     "value": "1.10"}, ...], "canonical": "<hex of the row bytes>", "row_hash": <int>,
     "row_hash_md5": <int>}

``row_hash`` is the xxh64 flavour of the contract, ``row_hash_md5`` the MD5 flavour
(``merkle.hashing.md5_hash64``) that databases compute; every implementation of a flavour
reproduces it.

Values by logical type: ``integer`` a JSON number; ``decimal`` a string; ``float`` a string
read by ``float()`` (so ``nan``, ``inf``, ``-0.0`` work); ``string``/``char``/``json`` a
string; ``bytes`` hex; ``boolean`` a bool, or an integer (a TINYINT(1)); ``date`` ISO;
``time`` ISO time of day, ``{"duration_micros": n}``, or ``{"micros": n}`` (microseconds
since midnight as an integer, as the lake stores times); ``timestamp`` naive ISO;
``timestamp_tz`` ISO with offset; ``uuid`` a string, or ``{"bytes": hex}``; ``interval``
``{"micros": n}`` or ``{"months": n}``; ``time_tz`` ISO time of day with offset, or the
struct ``{"micros": n, "offset_seconds": s}``; ``array<e>`` a list of ``e`` values;
``null`` is SQL NULL.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections import defaultdict
from collections.abc import Callable
from importlib import resources
from typing import Any

import pyarrow as pa

from merkle.canonical import Interval, RowEncoder, time_tz_parts
from merkle.hashing import hash_bytes, md5_hash64
from merkle.layout import RowLayout
from merkle.options import ComparisonOptions
from merkle.types import (
    TIME_TZ_FIELDS,
    ArrayType,
    BooleanType,
    BytesType,
    DateType,
    DecimalType,
    FloatType,
    IntegerType,
    IntervalType,
    JsonType,
    LogicalType,
    StringType,
    TimestampType,
    TimestampTzType,
    TimeType,
    TimeTzType,
    UuidType,
    parse_logical_type,
)

VECTORS_FILE = "golden_vectors.jsonl"

Outcome = tuple[str, int, int]
"""What an implementation produced for a vector: canonical bytes as hex, the row hash, and
the row hash in the MD5 flavour."""


def vectors_text() -> str:
    """The golden file's text."""
    return resources.files("merkle").joinpath(VECTORS_FILE).read_text(encoding="utf-8")


def load_vectors() -> list[dict[str, Any]]:
    """All golden vectors, in file order."""
    return [json.loads(line) for line in vectors_text().splitlines() if line.strip()]


def expected_outcomes(vectors: list[dict[str, Any]]) -> dict[str, Outcome]:
    """What the file says each vector must produce."""
    return {v["id"]: (v["canonical"], v["row_hash"], v["row_hash_md5"]) for v in vectors}


def python_outcomes(vectors: list[dict[str, Any]]) -> dict[str, Outcome]:
    """Replay vectors through the pure-Python implementation."""
    produced = {}
    for vector in vectors:
        ltypes = ltypes_of(vector)
        columns = zip(ltypes, vector["columns"], strict=True)
        values = [to_python(ltype, column["value"]) for ltype, column in columns]
        data = RowEncoder(ltypes, options_of(vector)).to_bytes(values)
        produced[vector["id"]] = (data.hex(), hash_bytes(data), md5_hash64(data))
    return produced


def spark_outcomes(spark: Any, vectors: list[dict[str, Any]]) -> dict[str, Outcome]:
    """Replay vectors through the Spark-native implementation, a small job per group of
    vectors of one shape (one job over the union of all 124 groups spent 85 s planning,
    against 26 s for the 124 jobs)."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for vector in vectors:
        groups[_group_key(vector)].append(vector)
    return {
        r["id"]: (bytes(r["bytes"]).hex(), r["row_hash"], r["row_hash_md5"])
        for group in groups.values()
        for r in _spark_frame(spark, group).collect()
    }


def _group_key(vector: dict[str, Any]) -> tuple[str, ...]:
    """Vectors that fit one DataFrame: same options, same logical and Spark types."""
    columns = zip(ltypes_of(vector), vector["columns"], strict=True)
    types = [f"{lt}:{spark_type_of(lt, c['value']).simpleString()}" for lt, c in columns]
    return (json.dumps(vector.get("options", {}), sort_keys=True), *types)


def _spark_frame(spark: Any, vectors: list[dict[str, Any]]) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from merkle.spark import md5_hash64_column, row_bytes_column

    first = vectors[0]
    ltypes = ltypes_of(first)
    names = [f"c{i}" for i in range(len(ltypes))]
    fields = [T.StructField("id", T.StringType())]
    for name, ltype, column in zip(names, ltypes, first["columns"], strict=True):
        fields.append(T.StructField(name, spark_type_of(ltype, column["value"])))
    rows = []
    for vector in vectors:
        columns = zip(ltypes, vector["columns"], strict=True)
        rows.append((vector["id"], *(to_spark_value(lt, c["value"]) for lt, c in columns)))
    df = spark.createDataFrame(rows, T.StructType(fields))
    for name, ltype, column in zip(names, ltypes, first["columns"], strict=True):
        if isinstance(ltype, IntervalType) and column["value"] and "months" in column["value"]:
            df = df.withColumn(name, F.make_ym_interval(F.lit(0), F.col(name)))
    layout = RowLayout.of(list(zip(names, ltypes, strict=True)), [names[0]], options_of(first))
    # The hashes of the selected bytes, not of their expression again: Spark analyses each
    # use of the expression (three uses took a third of this test's minute).
    encoded = df.select("id", row_bytes_column(df, layout).alias("bytes"))
    return encoded.select(
        "id",
        "bytes",
        F.xxhash64("bytes").alias("row_hash"),
        md5_hash64_column(F.col("bytes")).alias("row_hash_md5"),
    )


def duckdb_outcomes(connection: Any, vectors: list[dict[str, Any]]) -> dict[str, Outcome | str]:
    """Replay vectors through the DuckDB SQL of the MD5 flavour (``merkle.duckdb``) on a
    DuckDB ``connection``, each as a one-row Arrow table of the types a lake holds. DuckDB
    computes no xxh64: the outcome's row hash is the xxh64 of the bytes DuckDB produced. A
    vector DuckDB cannot compute gives the reason (``merkle.duckdb.NotInDuckDB``) instead."""
    from merkle.duckdb import NotInDuckDB, md5_hash64_sql, row_bytes_sql

    produced: dict[str, Outcome | str] = {}
    for vector in vectors:
        ltypes = ltypes_of(vector)
        names = [f"c{i}" for i in range(len(ltypes))]
        arrays = [
            pa.array([to_arrow_value(lt, c["value"])], arrow_type_of(lt, c["value"]))
            for lt, c in zip(ltypes, vector["columns"], strict=True)
        ]
        table = pa.Table.from_arrays(arrays, names)
        layout = RowLayout.of(list(zip(names, ltypes, strict=True)), [names[0]], options_of(vector))
        try:
            row_bytes = row_bytes_sql(layout, {f.name: f.type for f in table.schema})
        except NotInDuckDB as exc:
            produced[vector["id"]] = str(exc)
            continue
        connection.register("vector", table)
        sql = f"SELECT b, {md5_hash64_sql('b')} FROM (SELECT {row_bytes} AS b FROM vector)"
        data, md5 = connection.execute(sql).fetchall()[0]
        produced[vector["id"]] = (bytes(data).hex(), hash_bytes(bytes(data)), md5)
    return produced


def arrow_type_of(ltype: LogicalType, value: Any) -> pa.DataType:
    """The Arrow type a lake holds for this logical type and vector value shape (as
    ``spark_type_of``, for the readers' Arrow batches the pipeline writes)."""
    if isinstance(ltype, IntegerType):
        in_bigint = value is None or -(2**63) <= value < 2**63
        return pa.int64() if in_bigint else pa.decimal128(38, 0)
    if isinstance(ltype, DecimalType):
        if ltype.precision is None:
            return pa.decimal128(38, 18)
        return pa.decimal128(ltype.precision, ltype.scale or 0)
    if isinstance(ltype, FloatType):
        return pa.float32() if ltype.bits == 32 else pa.float64()
    if isinstance(ltype, TimeType):
        if isinstance(value, dict):
            return pa.int64() if "micros" in value else pa.duration("us")
        return pa.time64("us")
    if isinstance(ltype, TimeTzType):
        micros, offset = TIME_TZ_FIELDS
        return pa.struct([pa.field(micros, pa.int64()), pa.field(offset, pa.int32())])
    if isinstance(ltype, ArrayType):
        shapes = [item for item in value or () if item is not None]
        return pa.list_(arrow_type_of(ltype.element, shapes[0] if shapes else None))
    if isinstance(ltype, UuidType):
        return pa.binary() if isinstance(value, dict) else pa.string()
    if isinstance(ltype, IntervalType):
        if value is not None and "months" in value:
            return pa.month_day_nano_interval()
        return pa.duration("us")
    if isinstance(ltype, BooleanType) and type(value) is int:
        return pa.int64()  # a TINYINT(1) compared as boolean
    simple = {
        StringType: pa.string(),
        JsonType: pa.string(),
        BytesType: pa.binary(),
        BooleanType: pa.bool_(),
        DateType: pa.date32(),
        TimestampType: pa.timestamp("us"),
        TimestampTzType: pa.timestamp("us", tz="UTC"),
    }
    return simple[type(ltype)]


def to_arrow_value(ltype: LogicalType, value: Any) -> Any:
    """The Python object pyarrow takes for ``arrow_type_of`` the value."""
    if value is None:
        return None
    if isinstance(ltype, IntervalType) and "months" in value:
        return pa.MonthDayNano([value["months"], 0, 0])
    if isinstance(ltype, TimeTzType):
        parts = time_tz_parts(to_python(ltype, value))
        assert parts is not None  # the value is not NULL
        return dict(zip(TIME_TZ_FIELDS, parts, strict=True))
    if isinstance(ltype, ArrayType):
        return [to_arrow_value(ltype.element, item) for item in value]
    return to_spark_value(ltype, value)


def options_of(vector: dict[str, Any]) -> ComparisonOptions:
    """The comparison options a vector is encoded with."""
    return ComparisonOptions(**vector.get("options", {}))


def ltypes_of(vector: dict[str, Any]) -> list[LogicalType]:
    """The logical types of a vector's columns."""
    return [parse_logical_type(column["type"]) for column in vector["columns"]]


def to_python(ltype: LogicalType, value: Any) -> Any:
    """The Python value a database driver would hand over for a vector value."""
    if value is None:
        return None
    converters: dict[type, Callable[[Any], Any]] = {
        IntegerType: int,
        DecimalType: decimal.Decimal,
        FloatType: float,
        StringType: str,
        JsonType: str,
        BooleanType: _boolean,
        BytesType: bytes.fromhex,
        DateType: dt.date.fromisoformat,
        TimestampType: dt.datetime.fromisoformat,
        TimestampTzType: dt.datetime.fromisoformat,
    }
    if type(ltype) in converters:
        return converters[type(ltype)](value)
    if isinstance(ltype, TimeType):
        if isinstance(value, dict):
            if "micros" in value:
                return int(value["micros"])
            return dt.timedelta(microseconds=value["duration_micros"])
        return dt.time.fromisoformat(value)
    if isinstance(ltype, TimeTzType):
        return dict(value) if isinstance(value, dict) else dt.time.fromisoformat(value)
    if isinstance(ltype, ArrayType):
        return [to_python(ltype.element, item) for item in value]
    if isinstance(ltype, UuidType):
        return bytes.fromhex(value["bytes"]) if isinstance(value, dict) else value
    if isinstance(ltype, IntervalType):
        if "months" in value:
            return Interval(months=value["months"])
        return dt.timedelta(microseconds=value["micros"])
    raise TypeError(f"no vector codec for {ltype}")


def _boolean(value: bool | int) -> bool | int:
    """A JSON ``true``/``false``, or an integer as a TINYINT(1) column hands it over."""
    return value


def spark_type_of(ltype: LogicalType, value: Any) -> Any:
    """The Spark type a reader would produce for this logical type and value shape."""
    from pyspark.sql import types as T

    if isinstance(ltype, IntegerType):
        return T.LongType() if value is None or -(2**63) <= value < 2**63 else T.DecimalType(38, 0)
    if isinstance(ltype, DecimalType):
        if ltype.precision is None:
            return T.DecimalType(38, 18)
        return T.DecimalType(ltype.precision, ltype.scale or 0)
    if isinstance(ltype, FloatType):
        return T.FloatType() if ltype.bits == 32 else T.DoubleType()
    if isinstance(ltype, TimeType):
        if isinstance(value, dict):
            return T.LongType() if "micros" in value else T.DayTimeIntervalType()
        return T.TimeType(6)
    if isinstance(ltype, TimeTzType):
        micros, offset = TIME_TZ_FIELDS
        return T.StructType(
            [T.StructField(micros, T.LongType()), T.StructField(offset, T.IntegerType())]
        )
    if isinstance(ltype, ArrayType):
        shapes = [item for item in value or () if item is not None]
        return T.ArrayType(spark_type_of(ltype.element, shapes[0] if shapes else None))
    if isinstance(ltype, UuidType):
        return T.BinaryType() if isinstance(value, dict) else T.StringType()
    if isinstance(ltype, IntervalType):
        return T.LongType() if value is not None and "months" in value else T.DayTimeIntervalType()
    if isinstance(ltype, BooleanType) and type(value) is int:
        return T.LongType()  # a TINYINT(1) compared as boolean
    simple = {
        StringType: T.StringType(),
        JsonType: T.StringType(),
        BytesType: T.BinaryType(),
        BooleanType: T.BooleanType(),
        DateType: T.DateType(),
        TimestampType: T.TimestampNTZType(),
        TimestampTzType: T.TimestampType(),
    }
    return simple[type(ltype)]


def to_spark_value(ltype: LogicalType, value: Any) -> Any:
    """The Python object Spark's createDataFrame takes for ``spark_type_of`` the value."""
    if value is None:
        return None
    if isinstance(ltype, IntervalType) and "months" in value:
        return value["months"]  # turned into a year-month interval by the test
    if isinstance(ltype, IntegerType) and not -(2**63) <= value < 2**63:
        return decimal.Decimal(value)  # a DECIMAL(38,0) column, as BIGINT UNSIGNED reads
    if isinstance(ltype, TimeTzType):
        return time_tz_parts(to_python(ltype, value))  # the struct, as a tuple
    if isinstance(ltype, ArrayType):
        return [to_spark_value(ltype.element, item) for item in value]
    return to_python(ltype, value)
