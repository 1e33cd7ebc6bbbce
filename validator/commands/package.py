"""Bundle replcheck's packages for ``spark-submit`` on a cluster.

``spark-submit --py-files replcheck.zip replcheck_main.py validate --config ...`` puts the
archive on the driver's and every executor's Python path; the launcher runs the same CLI.
The executors also need replcheck's dependencies (xxhash, pyarrow, deltalake and the
drivers of the configured products): ship a packed virtualenv with ``--archives`` (see the
README), or install them on the cluster's nodes.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("cdc_core", "connectors", "merkle", "validator", "reports")
LAUNCHER = '''"""spark-submit entry point: the replcheck CLI, inside the submitted application."""

from validator.cli import main

main()
'''


@dataclass(frozen=True, slots=True)
class Bundle:
    """The two files spark-submit needs."""

    archive: Path
    launcher: Path


def build_bundle(out_dir: Path) -> Bundle:
    """Write ``replcheck.zip`` (the packages with their data files) and the launcher."""
    import validator

    root = Path(validator.__file__).resolve().parents[1]  # the folder holding the packages
    out_dir.mkdir(parents=True, exist_ok=True)
    archive = out_dir / "replcheck.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for package in PACKAGES:
            for path in sorted((root / package).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    bundle.write(path, path.relative_to(root).as_posix())
    launcher = out_dir / "replcheck_main.py"
    launcher.write_text(LAUNCHER, encoding="utf-8")
    return Bundle(archive, launcher)
