"""``replcheck cdc install-capture`` / ``remove-capture``: trigger capture set up explicitly.

Trigger capture changes the source's schema (logging tables, triggers, a sequence), so it is
never done implicitly: these commands print every statement they run, are idempotent (run
twice, the second changes nothing), and ``--dry-run`` prints the statements only. The
pipeline's source URL must capture by triggers (``capture=trigger``, or a product whose only
capture it is, such as SQLite).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cdc_core.errors import ConfigError
from cdc_core.pipeline.config import load_pipeline_config
from connectors.registry import capture_dialect_for, captures_by_trigger
from connectors.trigger_capture.install import Action, CapturePlan, apply_plan, plan_capture


def change_capture(
    config_path: Path,
    name: str,
    action: Action,
    show: Callable[[str], None],
    *,
    dry_run: bool = False,
    overrides: dict[str, str] | None = None,
) -> CapturePlan:
    """Install or remove trigger capture of the named pipeline's tables; returns the plan.

    Raises:
        ConfigError: The pipeline's source does not capture by triggers, or lists no tables.
    """
    setup = load_pipeline_config(config_path, name, overrides)
    connection = setup.source
    assert connection.url is not None  # a pipeline's source is a database connection
    if not captures_by_trigger(connection.url):
        raise ConfigError(
            f"pipeline {name} reads its source's log; add capture=trigger to the URL of"
            f" {connection.display()} to capture by triggers instead"
        )
    password = connection.password.reveal() if connection.password else None
    tables = list(setup.config.tables.accept)
    dialect = capture_dialect_for(connection.url, password, tables)
    try:
        plan = plan_capture(dialect, action, dialect.tables)
        apply_plan(dialect, plan, show, dry_run)
    finally:
        dialect.close()
    return plan
