"""A lake's Parquet files on an object store, read into Spark by the executors through
pyarrow.

A cluster needs no Delta or ``hadoop-aws`` jars for this: the driver resolves the Delta
snapshot (``cdc_core.lake.mirror_state`` lists the files), and each task opens its files with
pyarrow's filesystem for the store, the lake's settings shipped with the task
(``cdc_core.lake_location.StoreAccess``: the credentials travel inside Spark's task, as a
Hadoop configuration would; they are never logged). A column a file lacks (written before
the column was added) reads as NULL, as Spark's ``mergeSchema`` read of local files gives
it, and every column takes the type of the table's schema, so both reads hash alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from cdc_core.lake_location import StoreAccess

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

FILE_COLUMN = "file"


def conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly the columns of ``schema``, in its order and types: a column
    the file lacks is all NULL."""
    import pyarrow as pa

    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def store_frame(
    spark: SparkSession, files: Sequence[str], schema: pa.Schema, access: StoreAccess
) -> DataFrame:
    """The rows of the data ``files`` (URIs on the store ``access`` reaches), with the
    columns of ``schema``, one Spark partition per file."""
    from pyspark.sql.pandas.types import from_arrow_schema

    listed = spark.createDataFrame([(uri,) for uri in files], f"{FILE_COLUMN} string")
    plan = listed.repartition(len(files), FILE_COLUMN)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        filesystem = access.filesystem()
        for batch in batches:
            for uri in batch.column(0).to_pylist():
                found = pq.read_table(access.path_of(uri), filesystem=filesystem)
                yield from conformed(found, schema).to_batches()

    frame: DataFrame = plan.mapInArrow(read, from_arrow_schema(schema, prefer_timestamp_ntz=True))
    return frame
