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


# cdc_core's stage rooms, in pipeline order: a room may import the shared files at the top of
# cdc_core and the rooms before it, never one after it.
CDC_CORE_STAGES = ("capture", "state", "buffer", "lake", "rebuild", "ddl", "resync", "pipeline")


def stage_violations(root: Path) -> list[str]:
    """Every import in cdc_core of a later stage room, or of a room by a shared file."""
    violations = []
    for path in sorted((root / "cdc_core").rglob("*.py")):
        parts = path.relative_to(root / "cdc_core").parts
        own = CDC_CORE_STAGES.index(parts[0]) if len(parts) > 1 else -1
        for name in imported_names(path):
            room = name.split(".")[1] if name.startswith("cdc_core.") else None
            if room in CDC_CORE_STAGES and CDC_CORE_STAGES.index(room) > own:
                violations.append(f"{path.relative_to(root)}: imports {name}")
    return violations


def imported_names(path: Path) -> set[str]:
    """Every absolute module name a file imports, dotted in full."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_cdc_core_stages_import_only_earlier_stages() -> None:
    assert stage_violations(ROOT) == []


def test_the_stage_check_catches_a_later_stage(tmp_path: Path) -> None:
    (tmp_path / "cdc_core" / "buffer").mkdir(parents=True)
    (tmp_path / "cdc_core" / "buffer" / "spill.py").write_text(
        "from cdc_core.pipeline.loop import Pipeline\nfrom cdc_core.capture import events\n"
    )
    (tmp_path / "cdc_core" / "names.py").write_text("from cdc_core.lake.layout import OP\n")
    assert stage_violations(tmp_path) == [
        "cdc_core/buffer/spill.py: imports cdc_core.pipeline.loop",
        "cdc_core/names.py: imports cdc_core.lake.layout",
    ]


# The comparison engines share the walk, the lake flow and the sides (validator/engines/),
# never one another's modules.
ENGINES = ("database", "hybrid", "local", "spark")


def engine_imports(root: Path) -> list[str]:
    """Every import by one engine's folder of another engine's."""
    found = []
    for engine in ENGINES:
        for path in sorted((root / "validator" / "engines" / engine).rglob("*.py")):
            for name in imported_names(path):
                parts = name.split(".")
                other = (
                    parts[2] if parts[:2] == ["validator", "engines"] and len(parts) > 2 else None
                )
                if other in ENGINES and other != engine:
                    found.append(f"{path.relative_to(root)}: imports {name}")
    return found


def test_no_engine_imports_another() -> None:
    assert engine_imports(ROOT) == []


def test_the_engine_check_catches_an_engine_importing_another(tmp_path: Path) -> None:
    (tmp_path / "validator" / "engines" / "local").mkdir(parents=True)
    (tmp_path / "validator" / "engines" / "local" / "engine.py").write_text(
        "from validator.engines.hybrid.lake import SparkLake\n"
        "from validator.engines.sides.keys import KeyEntry\n"
    )
    assert engine_imports(tmp_path) == [
        "validator/engines/local/engine.py: imports validator.engines.hybrid.lake"
    ]


def internals_imported(root: Path) -> list[str]:
    """Every import of a private name (``_name``) from a module of another folder: a room
    may use its own internals, never a sibling's."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            folder = ".".join(path.relative_to(root).parts[:-1])
            for node in ast.walk(tree):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                    continue
                room = node.module.rpartition(".")[0]
                private = [a.name for a in node.names if a.name.startswith("_")]
                if private and room != folder and not _is_package(node.module, root):
                    found.append(f"{path.relative_to(root)}: {node.module}.{private[0]}")
    return found


def test_no_room_imports_a_siblings_internals() -> None:
    assert internals_imported(ROOT) == []


def test_the_internals_check_catches_a_private_name(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "cdc_core" / "lake").mkdir()
    (tmp_path / "cdc_core" / "lake" / "sink.py").write_text("from cdc_core.lake.layout import _a\n")
    (tmp_path / "connectors" / "sink.py").write_text("from cdc_core.lake.sink import _b, c\n")
    assert internals_imported(tmp_path) == ["connectors/sink.py: cdc_core.lake.sink._b"]


def module_of(path: Path, root: Path) -> str:
    """The dotted module name of a file (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def file_imports(path: Path, root: Path, modules: set[str]) -> set[str]:
    """The project modules a file imports, anywhere in it (type-only and lazy imports too:
    each is a dependency a reader has to follow)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
    return {name for name in found if name in modules and not _is_package(name, root)}


def _is_package(name: str, root: Path) -> bool:
    return (root / Path(*name.split("."))).is_dir()


def file_loops(root: Path) -> list[list[str]]:
    """Every loop of imports between the product's files (strongly connected components
    of more than one file, or a file importing itself)."""
    paths = [p for package in PACKAGES for p in sorted((root / package).rglob("*.py"))]
    modules = {module_of(p, root) for p in paths}
    graph = {module_of(p, root): file_imports(p, root, modules) for p in paths}
    return [sorted(c) for c in _components(graph) if len(c) > 1]


def _components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found


def test_no_two_files_import_each_other() -> None:
    assert file_loops(ROOT) == []


def test_the_loop_check_finds_a_loop_through_a_lazy_import(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "connectors" / "a.py").write_text("from connectors.b import x\n")
    (tmp_path / "connectors" / "b.py").write_text("def f():\n    from connectors import c\n")
    (tmp_path / "connectors" / "c.py").write_text("import connectors.a\n")
    assert file_loops(tmp_path) == [["connectors.a", "connectors.b", "connectors.c"]]
