"""The two oracles of a run: the source read with plain SQL against the lake mirror read with
``deltalake`` (normalised per type), and the product's own validator.

The independent comparison shares no code with the product's readers: pymysql/psycopg on
one side, the Delta table's Arrow rows on the other, and a normalisation that only states
how each side spells the same value (times as microseconds, instants in UTC, bytes as
``bytes``). The one product rule it applies is documented policy: MariaDB's zero date
reads as NULL (README, "MariaDB/MySQL source").
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdc_core.lake.layout import LakeTable
from cdc_core.lake_location import LakeLocation
from cdc_core.names import META_COLUMNS, format_part, format_table
from tests.generative.sql.source import SeedDatabase

VALIDATE_ATTEMPTS = 3
Rows = dict[tuple[Any, ...], dict[str, Any]]


def normalize(value: Any) -> Any:
    """One spelling per value, whichever side read it."""
    if isinstance(value, str) and value.startswith("0000-00-00"):
        return None  # pymysql returns a zero date as text; the product's policy: NULL
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    if isinstance(value, dt.timedelta):
        return value // dt.timedelta(microseconds=1)
    if isinstance(value, list):  # an array: a tuple, hashable for multisets of rows
        return tuple(normalize(item) for item in value)
    if isinstance(value, dict) and set(value) == {"micros", "offset_seconds"}:
        return value["micros"], value["offset_seconds"]  # the lake's time with time zone
    if isinstance(value, dt.time) and value.tzinfo is not None:
        offset = value.utcoffset() or dt.timedelta()
        return normalize(value.replace(tzinfo=None)), int(offset.total_seconds())
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 + value.microsecond
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _keyed(rows: list[dict[str, Any]], key: list[str], where: str) -> tuple[Rows, list[str]]:
    found: Rows = {}
    problems = []
    for row in rows:
        locator = tuple(normalize(row[k]) for k in key)
        if locator in found:
            problems.append(f"{where}: key {locator} twice")
        found[locator] = {c: normalize(v) for c, v in row.items() if c not in META_COLUMNS}
    return found, problems


# A seed's lake: a folder, or a prefix in an object store (the runner's ``Run.store``).
Lake = Path | LakeLocation


def _mirror_of(lake: Lake, name: str) -> LakeLocation | None:
    """The mirror's Delta table of the lake table ``name`` (None: none in the lake)."""
    mirror = LakeTable(lake, name).mirror_at
    return mirror if mirror.join("_delta_log").is_dir() else None


def _mirror_rows(mirror: LakeLocation) -> list[dict[str, Any]]:
    return _read_mirror(mirror, lambda delta: delta.to_pyarrow_table().to_pylist())


def _read_mirror(mirror: LakeLocation, read: Callable[[Any], Any]) -> Any:
    """``read`` of the mirror's Delta table, again while a reload moves it aside (the
    pipeline loads a table again after some DDL: mariadb-full seed 754)."""
    from deltalake.exceptions import DeltaError

    for attempt in range(MOVED_ATTEMPTS):
        try:
            return read(mirror.open_delta())
        except (DeltaError, FileNotFoundError):
            if attempt == MOVED_ATTEMPTS - 1:
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


MOVED_ATTEMPTS = 20  # 10 s for a reload to write the mirror again


def compare_table(database: SeedDatabase, lake: Lake, table: str, key: list[str]) -> list[str]:
    """The differences between the source table and its lake mirror (empty: equal)."""
    name = format_table(database.schema(), table)
    mirror = _mirror_of(lake, name)
    if mirror is None:
        return [f"{name}: no mirror in the lake"]
    source, problems = _keyed(database.rows(table), key, f"{name} source")
    rows = _mirror_rows(mirror)
    target, twice = _keyed(rows, key, f"{name} mirror")
    problems += twice
    columns = database.columns(table)
    for locator in sorted(source.keys() | target.keys(), key=repr):
        problems += _row_problems(name, locator, source.get(locator), target.get(locator), columns)
    return problems[:20]


def _row_problems(
    name: str, locator: tuple[Any, ...], source: dict[str, Any] | None,
    target: dict[str, Any] | None, columns: list[str],
) -> list[str]:  # fmt: skip
    if source is None:
        return [f"{name} {locator}: extra in the mirror"]
    if target is None:
        return [f"{name} {locator}: missing in the mirror"]
    problems = [
        f"{name} {locator} {column!r}: source {source[column]!r},"
        f" mirror {target.get(column, '<no column>')!r}"
        for column in columns
        if column not in target or target[column] != source[column]
    ]
    # A column dropped at the source stays in the lake, NULL from the drop on (README).
    dropped = [c for c in target if c not in source and target[c] is not None]
    return problems + [f"{name} {locator}: dropped columns {dropped} not NULL"] * bool(dropped)


def compare_rows(database: SeedDatabase, lake: Lake, table: str) -> list[str]:
    """The differences between a table without a key and its lake mirror, as multisets of
    rows (equal rows are copies in the lake: README, "Tables without a key")."""
    name = format_table(database.schema(), table)
    mirror = _mirror_of(lake, name)
    if mirror is None:
        return [f"{name}: no mirror in the lake"]
    columns = database.columns(table)
    source = Counter(tuple(normalize(row[c]) for c in columns) for row in database.rows(table))
    rows = _mirror_rows(mirror)
    target = Counter(tuple(normalize(row.get(c)) for c in columns) for row in rows)
    problems = [
        f"{name} {row}: {source[row]} at the source, {target[row]} in the mirror"
        for row in sorted(source.keys() | target.keys(), key=repr)
        if source[row] != target[row]
    ]
    return problems[:20]


def compare_all(database: SeedDatabase, lake: Lake) -> list[str]:
    """Differences of every table of the seed's database."""
    problems = []
    for table, key in sorted(database.tables().items()):
        if key:
            problems += compare_table(database, lake, table, key)
        else:
            problems += compare_rows(database, lake, table)
    return problems


def _lake_name(database: SeedDatabase, table: str) -> str:
    return format_table(database.schema(), table)


def validator_config(
    database: SeedDatabase,
    url: str,
    lake: Lake,
    path: Path,
    wait_s: float = 60.0,
    engine: str = "auto",
) -> Path:
    """A validator config comparing every table of the database with the lake."""
    comparisons = "".join(
        f"  - name: c{i}\n"
        f"    source: {{connection: src, table: {json.dumps(format_part(table))}}}\n"
        f"    target: {{connection: lake, table: {json.dumps(_lake_name(database, table))}}}\n"
        f"    columns: {{exclude: {json.dumps(_dropped_columns(database, lake, table))}}}\n"
        for i, table in enumerate(sorted(database.tables()))
    )
    path.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(url)}}}\n"
        f"  lake: {{lake: {json.dumps(str(lake))}}}\n"
        f"comparisons:\n{comparisons}"
        f"validation: {{lake_wait_timeout_s: {wait_s}, engine: {engine}}}\n",
        encoding="utf-8",
    )
    return path


def _dropped_columns(database: SeedDatabase, lake: Lake, table: str) -> list[str]:
    """Columns the mirror keeps after the source dropped them (README: NULL from the drop
    on), which the validator reports unless excluded by name, as a user would exclude them."""
    mirror = _mirror_of(lake, _lake_name(database, table))
    if mirror is None:
        return []
    kept = set(database.columns(table))
    names = [field.name for field in _read_mirror(mirror, lambda d: d.schema().fields)]
    return [name for name in names if name not in kept and not name.startswith("_")]


def validate(
    spark: Any, database: SeedDatabase, url: str, lake: Lake, work: Path, wait_s: float = 60.0
) -> list[str]:
    """What the product's validator reports that is not in sync (empty: all in sync).

    A snapshot that falls inside a table refresh's inexact window is refused with "validate
    again" (README, "Table refresh"): the validation is repeated, as the message asks."""
    from validator.config import load_validator_config
    from validator.job import validate as run

    path = validator_config(database, url, lake, work / "v.yaml", wait_s)
    config = load_validator_config(path, environ={})
    for _ in range(VALIDATE_ATTEMPTS):
        comparisons = run(spark, config)["comparisons"]
        if not any("validate again" in (c.get("error") or "") for c in comparisons):
            break
    return [
        f"validate {c['target']}: {c['status']} {c.get('error') or c.get('counts_by_kind')}"
        f" {_sample(c)}"
        for c in comparisons
        if c["status"] != "in_sync"
    ]


def _sample(comparison: dict[str, Any]) -> str:
    shown = comparison.get("differences") or comparison.get("rows") or []
    return json.dumps(shown[:3], default=str)[:600]


Judge = Callable[[SeedDatabase, Path, Path], list[str]]


def resync(database: SeedDatabase, work: Path, lake: Lake, totals: Counter[str]) -> list[str]:
    """``replcheck validate`` then ``replcheck resync --apply`` of what it found, as a user
    runs them while ``cdc run`` follows the log (the runner's ``resync`` item). Problems:
    either could not run, or the re-sync did not repair every difference (the later items
    and the judges then tell whether the repair lasts)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    path = validator_config(
        database, database.plain_url(), lake, work / "resync.yaml", 600.0, "auto"
    )
    out = work / "resync-validate"
    for _ in range(VALIDATE_ATTEMPTS):  # a refresh's inexact window: "validate again"
        command = [sys.executable, "-m", "validator.cli", "validate", "--config", str(path)]
        found = subprocess.run(
            [*command, "--out", str(out)], cwd=root, capture_output=True, text=True
        )
        if "validate again" not in found.stderr + found.stdout:
            break
    if found.returncode == 0:
        return []  # the drift was undone by the log (a logged delete, a table refresh)
    if found.returncode == 1:
        result = json.loads((out / "result.json").read_text(encoding="utf-8"))
        totals["resynced_keys"] += sum(
            len(c.get("differences") or []) for c in result["comparisons"]
        )
    if found.returncode != 1:
        return [f"validate before the re-sync exited {found.returncode}: {_errors(found)}"]
    command = [sys.executable, "-m", "validator.cli", "resync", "--config", str(path)]
    command += ["--result", str(out / "result.json"), "--apply"]
    repaired = subprocess.run(command, cwd=root, capture_output=True, text=True)
    if repaired.returncode != 0:
        return [f"resync --apply exited {repaired.returncode}: {_errors(repaired)}"]
    return []


def _errors(finished: Any) -> str:
    """A command's error lines (else the end of what it printed)."""
    output = finished.stdout + finished.stderr
    lines = [line for line in output.splitlines() if "error" in line.lower()]
    return "\n".join(lines)[-1500:] if lines else output[-1500:]
