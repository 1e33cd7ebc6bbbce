"""Rows per second of Oracle LogMiner output through the connector's row handling.

Builds V$LOGMNR_CONTENTS rows in memory (transactions of inserts and updates of a 6-column
table, as the shop recording has them) and times ``ChangeAssembler.feed``: SQL_REDO
parsing, value typing and raw change building, the connector's whole cost per row apart
from fetching it from the server.

    python -m bench.bench_oracle_redo [--rows 200000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import time
from pathlib import Path

from connectors.oracle.logminer.contents import ChangeAssembler, ContentsRow
from tests.connectors.oracle.replay import load_tables

TABLES = Path(__file__).resolve().parents[1] / "tests/connectors/oracle/data/shop_tables.json"
STAMP = dt.datetime(2026, 5, 1, 10, 0, 0)


def _rows(count: int) -> list[ContentsRow]:
    rows = []
    for scn in range(count):
        xid = f"{scn // 100:016X}"
        if scn % 100 == 0:
            rows.append(ContentsRow(scn, STAMP, xid, 6))
        elif scn % 100 == 99:
            rows.append(ContentsRow(scn, STAMP, xid, 7))
        else:
            rows.append(_dml(scn, xid))
    return rows


def _dml(scn: int, xid: str) -> ContentsRow:
    table = '"SHOP"."ORDERS"'
    if scn % 3:
        sql = (
            f'insert into {table}("ID","CUSTOMER","AMOUNT","STATUS","PLACED","NOTE") values'
            f" ('{scn}','customer {scn}','{scn}.25','NEW       ',"
            "TO_DATE('2026-05-01 09:59:00', 'YYYY-MM-DD HH24:MI:SS'),'a note of some length');"
        )
        code = 1
    else:
        sql = f"update {table} set \"AMOUNT\" = '{scn}.5' where \"AMOUNT\" = '{scn}.25';"
        code = 3
    return ContentsRow(
        scn, STAMP, xid, code, seg_owner="SHOP", table_name="ORDERS",
        row_id=f"AAAR3sAAEAAA{scn:06d}", rs_id=f" 0x{scn:08x} ", ssn=0, sql_redo=sql,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    args = parser.parse_args()
    rows = _rows(args.rows)
    assembler = ChangeAssembler(load_tables(TABLES), dt.UTC)
    started = time.perf_counter()
    changes = sum(len(assembler.feed(row)) for row in rows) + len(assembler.flush())
    elapsed = time.perf_counter() - started
    print(f"python {platform.python_version()} on {platform.machine()}")
    print(f"{args.rows:,} rows -> {changes:,} raw changes in {elapsed:.2f} s")
    print(f"{args.rows / elapsed:,.0f} V$LOGMNR_CONTENTS rows/s")


if __name__ == "__main__":
    main()
