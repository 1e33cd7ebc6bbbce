"""The WHERE text of a JDBC partition: Spark puts it after "WHERE", so it is never empty."""

from __future__ import annotations

from connectors.jdbc import JdbcDriver, JdbcRead
from connectors.model import Partition

READ = JdbcRead(JdbcDriver("x.Driver", "x.jar"), "jdbc:x://h/db", {}, "SELECT 1", quote=str)


def test_a_partition_without_bounds_reads_everything() -> None:
    # One partition for a small table: a key column, both ends open (found by the
    # generative tester: Spark sent "WHERE" with nothing after it to MariaDB).
    assert READ.predicate(Partition(0, "id")) == "1 = 1"
    assert READ.predicate(Partition(0)) == "1 = 1"


def test_bounded_partitions_keep_their_ranges_and_the_nulls_below() -> None:
    assert READ.predicate(Partition(0, "id", None, 5)) == (
        "(_replcheck_partition_key < 5 OR _replcheck_partition_key IS NULL)"
    )
    assert READ.predicate(Partition(1, "id", 5, None)) == "_replcheck_partition_key >= 5"
