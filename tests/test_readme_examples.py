"""The Python examples of README.md and docs/*.md, run as written, so they cannot rot.

Each ```python block of those pages is found by what it calls (exactly one block across all
pages calls it) and run in a directory holding the files it names (a config, a result),
against the test's private servers. The pages' relative links are checked too.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.drivers import DRIVER_EXTRAS
from tests.connectors.mariadb.pipeline_helpers import lake_rows
from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.resync.helpers import result_for, write_config
from validator.config import load_validator_config

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
# A row of the README's extras table: | `extra` | `module`, `module` | what it serves |
EXTRA_ROW = re.compile(r"^\| `(\w+)` \| ([^|]+) \|", re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def documentation_pages() -> list[Path]:
    """README.md and every page of docs/, the pages whose examples must run."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def _example(calling: str) -> tuple[Path, str]:
    found = [
        (page, block)
        for page in documentation_pages()
        for block in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
        if calling in block
    ]
    assert len(found) == 1, f"one example in README.md and docs/ calls {calling}: {found}"
    return found[0]


def _run(example: tuple[Path, str], where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page, code = example
    monkeypatch.chdir(where)
    exec(compile(code, str(page.relative_to(ROOT)), "exec"), {})  # the page's own code


def _anchors(page: Path) -> set[str]:
    """The heading anchors GitHub gives a page: lower case, punctuation dropped, spaces -."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    headings = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {
        (README.parent / target.partition("#")[0]).resolve()
        for target in LINK.findall(README.read_text(encoding="utf-8"))
    }
    assert [p for p in documentation_pages()[1:] if p.resolve() not in linked] == []


@pytest.mark.parametrize(
    "page",
    [*documentation_pages(), ROOT / "bench/RESULTS.md", ROOT / "bench/HISTORY.md"],
    ids=lambda page: str(page.relative_to(ROOT)),
)
def test_relative_links_lead_to_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if "://" in target:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and anchor not in _anchors(linked)):
            broken.append(target)
    assert broken == []


@pytest.mark.integration
@pytest.mark.mariadb
def test_the_pipeline_example_replicates_into_the_lake(
    tmp_path: Path,
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    database = mariadb_database(mariadb_minimal)
    with contextlib.closing(mariadb_minimal.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, note TEXT DEFAULT 'new')")
        cur.execute("INSERT INTO orders (id) VALUES (1)")
    (tmp_path / "pipeline.yaml").write_text(
        f"connections:\n  src: {{url: '{mariadb_minimal.url(database)}?heartbeat_s=0.2'}}\n"
        f"  lake: {{lake: '{tmp_path / 'lake'}'}}\n"
        f"pipelines:\n  - {{name: shop, source: src, target: lake, tables: ['{database}.*'],"
        f" state_dir: '{tmp_path / 'state'}'}}\n"
    )
    _run(_example("open_pipeline"), tmp_path, monkeypatch)
    reached = capsys.readouterr().out.split()[0]
    assert reached.startswith("mariadb-bin.")  # the initial load's position
    assert lake_rows(tmp_path / "lake", f"{database}.orders", ["id"]) == {
        (1,): {"id": 1, "note": "new"}
    }


def test_the_resync_example_repairs_from_a_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    for name, rows in (("src", [(1, "a"), (2, "b")]), ("tgt", [(1, "a")])):
        with contextlib.closing(sqlite3.connect(tmp_path / f"{name}.db")) as conn, conn:
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
            conn.executemany("INSERT INTO t VALUES (?, ?)", rows)
    path = write_config(
        tmp_path / "replcheck.yaml",
        {"src": f"sqlite:///{tmp_path / 'src.db'}", "tgt": f"sqlite:///{tmp_path / 'tgt.db'}"},
        "  - {name: t, source: {connection: src, table: t}, target: {connection: tgt, table: t}}",
        "validation: {recheck_lag_s: 0}\nresync: {audit: file}",
    )
    config = load_validator_config(path, environ={})
    result = result_for(config.comparison("t"), [("missing_in_target", ("2",))])
    (tmp_path / "replcheck-out").mkdir()
    (tmp_path / "replcheck-out/result.json").write_text(json.dumps(result))
    _run(_example("resync("), tmp_path, monkeypatch)
    assert capsys.readouterr().out.strip() == "0 applied"


def test_the_extras_table_names_each_extra_with_its_drivers() -> None:
    """The README's table says which extra installs which driver as ``cdc_core.drivers``
    does, and lists every extra of pyproject.toml but ``all`` and ``dev``."""
    rows = {
        extra: set(re.findall(r"`(\w+)`", modules))
        for extra, modules in EXTRA_ROW.findall(README.read_text(encoding="utf-8"))
    }
    drivers: dict[str, set[str]] = {}
    for module, extra in DRIVER_EXTRAS.items():
        drivers.setdefault(extra, set()).add(module)
    assert rows == drivers
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert set(rows) == set(declared["optional-dependencies"]) - {"all", "dev"}


@pytest.mark.integration
@pytest.mark.postgres
def test_the_postgres_example_compares_a_table_with_its_copy(
    tmp_path: Path,
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The README's ten lines, with no Spark: the copy lacks one row."""
    urls = {}
    for name, rows in (("shop", "(1, 'a'), (2, 'b')"), ("copy", "(1, 'a')")):
        database = postgres_database(postgres)
        with contextlib.closing(postgres.connect(database)) as conn:
            conn.execute("CREATE TABLE orders (id INT PRIMARY KEY, note TEXT)")
            conn.execute(f"INSERT INTO orders VALUES {rows}")
        urls[name] = f"postgresql://{postgres.user}@{postgres.host}:{postgres.port}/{database}"
    (tmp_path / "compare.yaml").write_text(
        f"connections:\n  shop: {{url: '{urls['shop']}'}}\n  copy: {{url: '{urls['copy']}'}}\n"
        "comparisons:\n  - {name: orders, source: {connection: shop, table: orders},"
        " target: {connection: copy, table: orders}}\n"
        "validation: {recheck_lag_s: 0}\n"
    )
    monkeypatch.setitem(sys.modules, "pyspark", None)  # no Spark to be had
    _run(_example("validate(None"), tmp_path, monkeypatch)
    assert capsys.readouterr().out.strip() == "orders differences {'missing_in_target': 1}"
