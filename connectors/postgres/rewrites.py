"""DDL that changes stored values yet leaves the catalog as it was, made visible in the log.

Logical decoding shows no DDL; the pipeline sees most value-changing DDL as a new table
shape (``log_reader``: Relation messages, the quiet-log catalog check). Two kinds leave the
shape alone: a table rewrite keeping every column's name, type and default (``ALTER COLUMN
c TYPE text USING upper(c)`` on a ``text`` column) and an ``ALTER TYPE`` of a type columns
use (an enum value renamed). Two event triggers write a transactional logical decoding
message (``pg_logical_emit_message``) naming the table into the DDL's own transaction, so
the message reaches the pipeline at the DDL's place in the log (and never when it rolls
back); the pipeline refreshes the table from there.

Event triggers are database-wide objects only a superuser can create. ``cdc run`` creates
them when it may (URL parameter ``record_rewrites``, default true, like the publication and
the slot); a user who may not is told which statements a superuser should run. The
functions are ``SECURITY DEFINER``: any role's DDL can write the message.
References: https://www.postgresql.org/docs/current/event-trigger-definition.html ,
https://www.postgresql.org/docs/current/functions-admin.html (``pg_logical_emit_message``).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from cdc_core.names import format_table

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)

PREFIX = "replcheck.values_changed"
"""The prefix of the messages the triggers write (one per table whose values may differ)."""
SCHEMA = "replcheck_ddl"
TRIGGERS = ("replcheck_table_rewrite", "replcheck_type_change")
VERSION = "replcheck rewrite triggers 2"
"""Marks the functions' current text: older ones (a partition's rewrite named only the
partition, seed 438) are replaced on the next start."""

_EMIT = (
    f"PERFORM pg_catalog.pg_logical_emit_message(true, '{PREFIX}', pg_catalog.json_build_object("
    "'schema', named.nspname, 'table', named.relname, 'cause', {cause})::text)"
)

INSTALL: tuple[str, ...] = (
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.note_rewrite() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
  named record; rewritten oid := pg_event_trigger_table_rewrite_oid();
BEGIN
  -- {VERSION}. A partition is rewritten, never its partitioned ancestors (they hold no
  -- rows), yet a pipeline captures it through its root: every ancestor is named too.
  FOR named IN
    SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = rewritten OR c.oid IN (SELECT relid FROM pg_partition_ancestors(rewritten))
  LOOP
    {_EMIT.format(cause="'rewrite'")};
  END LOOP;
END $$""",
    f"""CREATE OR REPLACE FUNCTION {SCHEMA}.note_type_change() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
DECLARE
  changed record; named record;
BEGIN
  FOR changed IN SELECT objid FROM pg_event_trigger_ddl_commands() WHERE object_type = 'type'
  LOOP
    FOR named IN
      SELECT DISTINCT n.nspname, c.relname FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_type t ON t.oid = a.atttypid
       WHERE c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
         AND changed.objid IN (a.atttypid, t.typelem, t.typbasetype)
    LOOP
      {_EMIT.format(cause="'type'")};
    END LOOP;
  END LOOP;
END $$""",
    f"DROP EVENT TRIGGER IF EXISTS {TRIGGERS[0]}",
    f"CREATE EVENT TRIGGER {TRIGGERS[0]} ON table_rewrite EXECUTE FUNCTION {SCHEMA}.note_rewrite()",
    f"DROP EVENT TRIGGER IF EXISTS {TRIGGERS[1]}",
    f"CREATE EVENT TRIGGER {TRIGGERS[1]} ON ddl_command_end WHEN TAG IN ('ALTER TYPE')"
    f" EXECUTE FUNCTION {SCHEMA}.note_type_change()",
)
"""The statements that install the triggers (idempotent; run by a superuser)."""


def ensure_rewrite_triggers(connection: psycopg.Connection[Any], where: str, create: bool) -> None:
    """Install the event triggers unless they are there and enabled; warn when they are
    missing and may not (``create`` false) or cannot (not a superuser) be installed."""
    if _installed(connection):
        return
    row = connection.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    superuser = (row.fetchone() or (False,))[0]
    if create and superuser:
        with connection.transaction():
            # Pipelines starting at once on one database install one after the other.
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (_INSTALL_LOCK,))
            if not _installed(connection):
                for statement in INSTALL:
                    connection.execute(statement)
                logger.info(
                    "created event triggers %s (functions in schema %s) on %s: DDL that"
                    " changes stored values but no column reaches the log"
                    " (record_rewrites=false in the URL: not created)",
                    list(TRIGGERS),
                    SCHEMA,
                    where,
                )
        return
    if where in _WARNED:
        return
    _WARNED.add(where)
    logger.warning(
        "%s: the event triggers %s are missing or out of date, so a DDL that changes stored"
        " values but leaves every column's name, type and default as it was (ALTER COLUMN ..."
        " TYPE ... USING on the same type, an enum value renamed) would not reach the lake; %s",
        where,
        list(TRIGGERS),
        "run cdc run once as a superuser, or let one run the statements in docs/cdc-postgres.md"
        if create
        else "remove record_rewrites=false from the source URL to install them",
    )


_WARNED: set[str] = set()  # the sources warned about already (each snapshot chunk asks)
_INSTALL_LOCK = 0x7265706C63686B  # "replchk": an advisory lock key of replcheck's own


def _installed(connection: psycopg.Connection[Any]) -> bool:
    """Both triggers are there, enabled, and their functions are this version's."""
    row = connection.execute(
        "SELECT count(*) FROM pg_event_trigger t JOIN pg_proc p ON p.oid = t.evtfoid"
        " WHERE t.evtname = ANY(%s) AND t.evtenabled <> 'D'"
        " AND (t.evtname <> %s OR strpos(p.prosrc, %s) > 0)",
        (list(TRIGGERS), TRIGGERS[0], VERSION),
    ).fetchone()
    return row is not None and row[0] == len(TRIGGERS)


def changed_table(content: bytes) -> str | None:
    """The table (``schema.table``) a trigger's message names; None if it names none."""
    try:
        named = json.loads(content)
        return format_table(named["schema"], named["table"])
    except (ValueError, KeyError, TypeError):
        return None
