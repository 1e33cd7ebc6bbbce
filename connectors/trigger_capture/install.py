"""Setting trigger capture up and removing it: explicit, idempotent, printed, dry-run-able.

Trigger capture is never installed implicitly: the pipeline refuses to start on a table whose
capture is not installed (``TriggerDialect.check_installed``) rather than install it. (The
PostgreSQL log source's two event triggers, ``connectors/postgres/rewrites.py``, are created
by ``cdc run`` like its publication and slot, and announced.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from cdc_core.errors import ConfigError
from connectors.trigger_capture.dialect import TriggerDialect

Action = Literal["install", "remove"]


@dataclass(frozen=True, slots=True)
class CapturePlan:
    """The statements that install or remove capture of some tables, in order."""

    action: Action
    tables: tuple[str, ...]
    statements: tuple[str, ...]


def plan_capture(dialect: TriggerDialect, action: Action, tables: Sequence[str]) -> CapturePlan:
    """The plan of ``action`` for ``tables`` (reads the catalog, changes nothing).

    Raises:
        ConfigError: No tables, or a table trigger capture cannot serve (the message says why).
    """
    if not tables:
        raise ConfigError("trigger capture needs the tables it covers listed by name")
    if action == "install":
        statements = dialect.install_statements(tables)
    else:
        statements = dialect.removal_statements(tables)
    return CapturePlan(action, tuple(tables), tuple(statements))


def apply_plan(
    dialect: TriggerDialect, plan: CapturePlan, show: Callable[[str], None], dry_run: bool
) -> None:
    """Show each statement, then run them all (one transaction where the product can)."""
    for statement in plan.statements:
        show(statement + ";")
    if not dry_run:
        dialect.execute(plan.statements)
