"""The package layering of STYLE.md, checked by walking every import.

cdc_core <- merkle <- connectors <- validator; reports renders results and never queries a
database; no package but connectors (and the validator's readers) talks to a database.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cdc_core", "merkle", "connectors", "validator", "reports")
DRIVERS = {
    "pymysql",
    "pymysqlreplication",
    "psycopg",
    "psycopg2",
    "oracledb",
    "hdbcli",
    "sqlalchemy",
    "duckdb",
    "sqlite3",
}

# What each package may import from the others (and whether it may import drivers).
ALLOWED = {
    "cdc_core": set(),
    "merkle": {"cdc_core"},
    "connectors": {"cdc_core", "merkle"},
    "validator": {"cdc_core", "merkle", "connectors", "reports"},
    "reports": {"cdc_core", "merkle"},
}
MAY_USE_DRIVERS = {"connectors", "validator"}


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module a file imports (absolute imports only)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def layering_violations(root: Path) -> list[str]:
    """Every import that breaks the layering, as 'file: imports X'."""
    violations = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for name in imported_modules(path):
                if name in PACKAGES and name != package and name not in ALLOWED[package]:
                    violations.append(f"{path.relative_to(root)}: imports {name}")
                if name in DRIVERS and package not in MAY_USE_DRIVERS:
                    violations.append(f"{path.relative_to(root)}: imports driver {name}")
    return violations


def test_packages_import_only_downwards() -> None:
    assert layering_violations(ROOT) == []


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "merkle" / "bad.py").write_text("from validator import cli\nimport psycopg\n")
    assert sorted(layering_violations(tmp_path)) == [
        "merkle/bad.py: imports driver psycopg",
        "merkle/bad.py: imports validator",
    ]


@pytest.mark.parametrize("module", ["validator.cli", "merkle.tree", "cdc_core.errors"])
def test_heavy_dependencies_are_imported_lazily(module: str) -> None:
    code = (
        f"import sys, {module}; "
        "heavy = {'pyspark', 'pymysql', 'psycopg', 'psycopg2', 'oracledb', 'hdbcli', "
        "'great_expectations', 'pandas'} & set(sys.modules); print(sorted(heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
