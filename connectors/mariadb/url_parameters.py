"""The query parameters of a MariaDB URL that belong to the CDC log source.

One connection serves the pipeline and the validator: the log source takes these (see
``connectors/mariadb/log_source.py`` for their meaning) and every other consumer leaves
them out; the validator's reader takes no parameter of its own, so any other is an error.
"""

from __future__ import annotations

NUMBERS = ("server_id", "heartbeat_s")
KEY_PREFIX = "key."  # key.<table>=col,col: the columns locating rows of a keyless table
LOG_PARAMETERS = (*NUMBERS, KEY_PREFIX + "<table>")


def is_log_parameter(name: str) -> bool:
    """Whether a URL query parameter is the log source's."""
    return name in NUMBERS or (name.startswith(KEY_PREFIX) and name != KEY_PREFIX)
