"""Source frames read by Spark's JDBC source (``connectors.jdbc``).

A frame has the columns, types and extra columns of the Python readers' frames
(``sources.py`` here) — the same Spark types, from the same Arrow schema — so the hash
contract sees identical values whichever path read them, and a value the Python reader
refuses fails the read with its message (``connectors.jdbc.Refusal``). The driver's jar
must be on the session's classpath (``spark.jars``; ``validator.engines.sides.spark.session``
adds the system's jars).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cdc_core.names import backtick_quote
from connectors.jdbc import JdbcDriver, JdbcRead, Refusal, Transport
from connectors.model import POSITION_COLUMN, Partition
from validator.positions import PARTITION_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType


def jdbc_available(spark: SparkSession, driver: JdbcDriver) -> bool:
    """Whether the session was started with ``driver``'s jar."""
    jars = spark.conf.get("spark.jars", "") or ""  # the server's, under Spark Connect
    return any(jar.rstrip("/").endswith(driver.jar) for jar in jars.split(","))


def _typed(value: Column, transport: Transport, dtype: DataType) -> Column:
    """A transported value as the type the Python readers give the column."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if transport is Transport.EPOCH_DAYS:
        return F.date_from_unix_date(value.cast("int"))
    if transport is Transport.NONZERO:
        return value != 0
    if transport is Transport.EPOCH_MICROS and isinstance(dtype, T.TimestampNTZType):
        return F.timestamp_micros(value.cast("long")).cast("timestamp_ntz")  # the session is UTC
    if transport is Transport.EPOCH_MICROS and isinstance(dtype, T.TimestampType):
        return F.timestamp_micros(value.cast("long"))
    return value.cast(dtype)


def _refusing(typed: dict[str, Column], name: str, raw: Column, refusal: Refusal) -> Column:
    """Column ``name`` of ``typed``, failing the read as the Python reader does on a value it
    refuses: the same message, the key written as ``connectors.base.key_text`` writes it."""
    from pyspark.sql import functions as F

    shown = [
        F.concat(F.lit(f"{key}="), F.coalesce(typed[key].cast("string"), F.lit("NULL")))
        for key in refusal.key
    ]
    message = F.concat(F.lit(refusal.before), F.concat_ws(", ", *shown), F.lit(refusal.after))
    return F.when(raw == refusal.marker, F.raise_error(message)).otherwise(typed[name])


def jdbc_frame(
    spark: SparkSession, read: JdbcRead, partitions: Sequence[Partition], schema: pa.Schema
) -> DataFrame:
    """The rows of ``partitions`` read over JDBC, typed by ``schema`` (the connector's Arrow
    schema: the columns, then ``POSITION_COLUMN``), with ``PARTITION_COLUMN``."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    raw = spark.read.jdbc(
        read.url,
        f"({read.query}) replcheck_source",
        predicates=[read.predicate(p) for p in partitions],
        properties=dict(read.properties),
    )
    typed = {
        field.name: _typed(
            raw[backtick_quote(field.name)], read.transports[field.name], field.dataType
        )
        for field in from_arrow_schema(schema).fields
        if field.name != POSITION_COLUMN
    }
    columns = [
        (
            _refusing(typed, name, raw[backtick_quote(name)], read.refusals[name])
            if name in read.refusals
            else value
        ).alias(name)
        for name, value in typed.items()
    ]
    # Spark reads predicate i as partition i, so the partition id is the plan's index.
    if [p.index for p in partitions] != list(range(len(partitions))):
        raise ValueError("JDBC partitions must be numbered 0..n-1 in order")
    return raw.select(
        *columns,
        raw[POSITION_COLUMN].cast("long").alias(POSITION_COLUMN),
        F.spark_partition_id().alias(PARTITION_COLUMN),
    )
