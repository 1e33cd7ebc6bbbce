"""Read a source table into Spark: partitions read in parallel by the executors.

Each Spark task opens its own connection and reads one key range: over JDBC in the JVM when
the product's connector describes such a read and its driver is on the classpath
(``jdbc_source.py`` here), else through the product's Python driver, rows travelling as
Arrow batches. Either way the columns are typed as the hash contract expects and hashing
stays in Spark SQL. A table whose first key column is not an integer is read as one
partition.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from connectors.base import Connector
from connectors.model import Partition, Snapshot, TableSchema
from merkle import types as lt
from validator.engines.sides.spark.jdbc_source import jdbc_available, jdbc_frame
from validator.positions import PARTITION_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

# A partition is read, hashed and cached by one task: past a few hundred thousand rows its
# cached block outgrows a small executor's memory (10M rows in 2 partitions ran a 2 GB
# local session out of heap). The key span bounds the row count from above, so sparse keys
# only make partitions smaller; MAX_PARTITIONS bounds the connections and snapshots a read
# opens.
ROWS_PER_PARTITION_HINT = 250_000
MAX_PARTITIONS = 256
log = logging.getLogger(__name__)


def plan_partitions(
    connector: Connector, schema: TableSchema, key: Sequence[str], parallelism: int
) -> list[Partition]:
    """Key ranges of the first key column when it is an integer, else one partition: at
    least ``parallelism`` of them, and more for a large key span (at most
    ``ROWS_PER_PARTITION_HINT`` keys a range, at most ``MAX_PARTITIONS`` ranges)."""
    first = schema.column(key[0]) if key else None
    if first is None or not isinstance(first.ltype, lt.IntegerType):
        return [Partition(0)]
    bounds = connector.key_range(schema.table, first.name)
    if bounds is None:
        return [Partition(0)]
    low, high = bounds
    span = high - low + 1
    wanted = max(parallelism, min(MAX_PARTITIONS, -(-span // ROWS_PER_PARTITION_HINT)))
    count = max(1, min(wanted, span))
    step = (high - low + count) // count
    edges: list[int | None] = [low + i * step for i in range(count)] + [None]
    edges[0] = None  # open-ended below and above: rows inserted after planning are read too
    return [Partition(i, first.name, edges[i], edges[i + 1]) for i in range(count)]


def source_frame(
    spark: SparkSession,
    connector: Connector,
    schema: TableSchema,
    columns: Sequence[str],
    partitions: Sequence[Partition],
    snapshot: Snapshot | None = None,
    jdbc: bool = True,
) -> DataFrame:
    """``columns`` plus ``POSITION_COLUMN`` and ``PARTITION_COLUMN``, read partition by
    partition in the executors (all in ``snapshot`` when the product can share one): over
    JDBC when the connector can and the session has its driver (and ``jdbc``), else through
    the Python drivers. Both give the same values, typed alike."""
    if jdbc:
        read = connector.jdbc_read(schema, columns, partitions[0].column, snapshot)
        if read is not None and jdbc_available(spark, read.driver):
            log.info("reading %s over JDBC in %d partitions", schema.table, len(partitions))
            return jdbc_frame(spark, read, partitions, connector.arrow_schema(schema, columns))
    return _python_frame(spark, connector, schema, columns, partitions, snapshot)


def _python_frame(
    spark: SparkSession,
    connector: Connector,
    schema: TableSchema,
    columns: Sequence[str],
    partitions: Sequence[Partition],
    snapshot: Snapshot | None,
) -> DataFrame:
    from pyspark.sql.pandas.types import from_arrow_schema

    plan = spark.createDataFrame(
        [(p.index, p.column, p.low, p.high) for p in partitions],
        "index int, column string, low bigint, high bigint",
    ).repartition(len(partitions), "index")
    import pyarrow as pa

    arrow_schema = connector.arrow_schema(schema, columns).append(
        pa.field(PARTITION_COLUMN, pa.int32())
    )
    wanted = list(columns)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for row in batch.to_pylist():
                partition = Partition(**row)
                for part in connector.read_partition(schema, wanted, partition, snapshot):
                    index = pa.array([partition.index] * part.num_rows, pa.int32())
                    yield part.append_column(PARTITION_COLUMN, index)

    frame: DataFrame = plan.mapInArrow(read, from_arrow_schema(arrow_schema))
    return frame
