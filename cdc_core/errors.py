"""The error hierarchy shared by every replcheck package.

One root (`ReplcheckError`), two markers (`TransientError`, `TerminalError`) so retry logic
can be generic, and structured context (source, table, position) so messages are useful
without anyone formatting row values into them. Only the CLI turns these into exit codes.
"""

from __future__ import annotations

from collections.abc import Mapping


class ReplcheckError(Exception):
    """Root of every error replcheck raises on purpose.

    Args:
        message: What went wrong and, where known, how to fix it.
        context: Structured facts (``source``, ``table``, ``position``, ...). Never row values.
    """

    exit_code: int = 2

    def __init__(self, message: str, context: Mapping[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.context: dict[str, object] = dict(context or {})

    def __str__(self) -> str:
        if not self.context:
            return self.message
        facts = ", ".join(f"{key}={value}" for key, value in sorted(self.context.items()))
        return f"{self.message} [{facts}]"


class TransientError(ReplcheckError):
    """A failure that may succeed when retried (network blip, lock timeout, lake behind)."""


class TerminalError(ReplcheckError):
    """A failure that retrying cannot fix (bad config, missing table, purged log)."""


class ConfigError(TerminalError):
    """The configuration is invalid; the message names the key and the fix."""


class ContractError(TerminalError):
    """A value cannot be encoded under the hash contract (wrong type, out of range)."""


class DiskFullError(TerminalError):
    """A write found no space left on its device (``cdc_core.disk_full``): it was given up
    whole, and a run started again once space is freed resumes from the last checkpoint."""
