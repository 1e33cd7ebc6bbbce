"""A sensitive column in the key: no output shows its values, re-sync still repairs the rows.

MariaDB source, PostgreSQL target, compared by the database engine (no Spark). The key is
(email, n) with ``email`` sensitive. Every file validate, report and resync write, and
everything they print, is searched for the e-mail addresses; the result shows each masked
part as a token (``***#`` + keyed hash) that tells rows apart, and ``resync --apply`` finds
the rows from the tokens and leaves the target equal to the source.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.resync.helpers import write_config
from validator import cli
from validator.key_masks import KEY_FILE

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

SOURCE = [
    ("ada@secret.example", 1, "a"),
    ("bob@secret.example", 2, "b"),
    ("cy@secret.example", 3, "c"),
]
TARGET = [
    ("ada@secret.example", 1, "a"),
    ("bob@secret.example", 2, "B!"),
    ("dee@secret.example", 4, "d"),
]
VALUES = ["ada@secret", "bob@secret", "cy@secret", "dee@secret"]


@pytest.fixture
def config(
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> tuple[Path, Callable[[], list[tuple[object, ...]]]]:
    source = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE p (email VARCHAR(64), n INT, note TEXT, PRIMARY KEY (email, n))")
        cur.executemany("INSERT INTO p VALUES (%s, %s, %s)", SOURCE)
    target = postgres_database(postgres)
    with contextlib.closing(postgres.connect(target)) as conn:
        conn.execute("CREATE TABLE p (email varchar(64), n int, note text, PRIMARY KEY (email, n))")
        conn.cursor().executemany("INSERT INTO p VALUES (%s, %s, %s)", TARGET)

    def rows() -> list[tuple[object, ...]]:
        with contextlib.closing(postgres.connect(target)) as conn:
            return [tuple(r) for r in conn.execute("SELECT * FROM p ORDER BY n").fetchall()]

    path = write_config(
        tmp_path / "replcheck.yaml",
        {"src": mariadb_full.url(source), "tgt": postgres.url(target)},
        "  - name: people\n    source: {connection: src, table: p}\n"
        "    target: {connection: tgt, table: p}\n    columns: {sensitive: [email]}",
        "validation: {recheck_lag_s: 0, engine: database}\nresync: {audit: file}",
    )
    return path, rows


def _everything(out: Path, printed: str) -> str:
    files = [p for p in out.rglob("*") if p.is_file() and p.name != KEY_FILE]
    return printed + "".join(p.read_text(encoding="utf-8", errors="replace") for p in files)


def test_key_values_never_shown_and_resync_repairs_from_tokens(
    config: tuple[Path, Callable[[], list[tuple[object, ...]]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, target_rows = config
    out = tmp_path / "out"
    assert cli.run(["validate", "-c", str(path), "--out", str(out)]) == 1
    result = json.loads((out / "result.json").read_text())
    keys = [tuple(d["key"]) for d in result["comparisons"][0]["differences"]]
    assert len(keys) == 3 and len(set(keys)) == 3  # changed 2, missing 3, extra 4
    assert all(key[0].startswith("***#") and len(key[0]) == 20 for key in keys)
    assert (out / KEY_FILE).stat().st_mode & 0o077 == 0
    for option, name in (("--markdown", "r.md"), ("--junit", "r.xml"), ("--html", "r.html")):
        assert cli.run(["report", str(out / "result.json"), option, str(out / name)]) == 0
    assert cli.run(["resync", "-c", str(path), "--result", str(out / "result.json")]) == 0
    assert (
        cli.run(["resync", "-c", str(path), "--result", str(out / "result.json"), "--apply"]) == 0
    )
    shown = _everything(out, "".join(capsys.readouterr()))
    assert not [value for value in VALUES if value in shown]
    assert target_rows() == SOURCE


def test_resync_without_the_secret_says_where_it_is(
    config: tuple[Path, Callable[[], list[tuple[object, ...]]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path, target_rows = config
    out = tmp_path / "out"
    assert cli.run(["validate", "-c", str(path), "--out", str(out)]) == 1
    (out / KEY_FILE).unlink()
    capsys.readouterr()
    assert cli.run(["resync", "-c", str(path), "--result", str(out / "result.json")]) == 2
    assert KEY_FILE in capsys.readouterr().out
    assert target_rows() == TARGET


def test_a_configured_mask_key_gives_the_same_tokens_every_run_and_needs_no_file(
    config: tuple[Path, Callable[[], list[tuple[object, ...]]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, target_rows = config
    path.write_text(
        path.read_text().replace("validation: {", "validation: {mask_key: {env: MASK}, ")
    )
    monkeypatch.setenv("MASK", "a secret only the operators know")
    keys = []
    for run in ("one", "two"):
        out = tmp_path / run
        assert cli.run(["validate", "-c", str(path), "--out", str(out)]) == 1
        assert not (out / KEY_FILE).exists()
        result = json.loads((out / "result.json").read_text())
        keys.append(sorted(tuple(d["key"]) for d in result["comparisons"][0]["differences"]))
    assert keys[0] == keys[1]
    argv = ["resync", "-c", str(path), "--result", str(tmp_path / "two/result.json"), "--apply"]
    assert cli.run(argv) == 0
    assert target_rows() == SOURCE
