"""The query parameters of a PostgreSQL URL that belong to the CDC log source.

One connection serves the pipeline and the validator: the log source takes these (see
``connectors/postgres/log_source.py`` for their meaning), every other consumer leaves them
out, and what remains goes to libpq, which refuses a parameter it does not know by name.
"""

from __future__ import annotations

TEXT = ("slot", "publication", "decoding_work_mem")
FLAGS = ("create_slot", "create_publication", "record_rewrites")
SECONDS = ("idle_s",)
KEY_PREFIX = "key."  # key.<table>=col,col: the columns locating rows of a keyless table
LOG_PARAMETERS = (*TEXT, *FLAGS, *SECONDS, KEY_PREFIX + "<table>")


def is_log_parameter(name: str) -> bool:
    """Whether a URL query parameter is the log source's (not libpq's)."""
    return name in (*TEXT, *FLAGS, *SECONDS) or (name.startswith(KEY_PREFIX) and name != KEY_PREFIX)
