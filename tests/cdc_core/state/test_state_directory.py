"""One value names the files of a state directory: a run writes exactly those."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core.state.directory import StateDirectory
from tests.cdc_core.kill_loop import write_config
from tests.cli_runs import replcheck

URL = "synthetic:///?seed=5&transactions=40&tables=1&initial_rows=20"


@pytest.mark.integration
def test_a_run_writes_the_files_the_state_directory_names(tmp_path: Path) -> None:
    config = write_config(tmp_path, URL)

    result = replcheck(
        "cdc", "run", "--config", str(config), "--pipeline", "soak", "--until-caught-up"
    )

    assert result.returncode == 0, result.stderr
    files = StateDirectory(tmp_path / "state")
    assert files.checkpoint.is_file()
    assert files.lock.is_file()
    assert (files.images / "data.mdb").is_file()
    assert not files.checkpoint_temporary.exists()  # replaced over the checkpoint
    named = {files.checkpoint, files.lock, files.images, files.spill}
    assert set(files.root.iterdir()) <= named  # nothing the value does not name
