"""The progress table of a database target: how far each pipeline's writes reached, written
in the same target transaction as the rows, so a crash at any point neither loses nor
repeats a change.

One row per pipeline and table (``table_name`` = the source table): the position and the
last seq written there, the part of a transaction too big for one batch written so far,
and (``detail``) whether its target table is being loaded (``record``). One more row per
pipeline (``table_name`` = ``''``) holds the position the whole pipeline reached, its
tables, its refresh marks and the conflicts counted: the target's own high-water mark,
which the validator reads (``replication: replcheck``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cdc_core.capture.position import Position
from cdc_core.lake.layout import RefreshMarks
from cdc_core.lake.target import Written
from cdc_core.names import same_table

if TYPE_CHECKING:
    import sqlalchemy as sa

PROGRESS_TABLE = "replcheck_progress"
PIPELINE_ROW = ""  # the table_name of a pipeline's own row
LOADING = '{"loading": true}'  # the detail of a table's row while its table is loaded
NOTHING_WRITTEN = Written(None, -1, None, -1)


def progress_table(metadata: sa.MetaData, schema: str | None) -> sa.Table:
    """The progress table's definition (created when missing)."""
    import sqlalchemy as sa

    return sa.Table(
        PROGRESS_TABLE,
        metadata,
        sa.Column("pipeline", sa.String(128), primary_key=True),
        sa.Column("table_name", sa.String(512), primary_key=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("position_text", sa.String(256), nullable=False),
        sa.Column("seq", sa.BigInteger, nullable=False),
        sa.Column("part_pos", sa.BigInteger),
        sa.Column("part_seq", sa.BigInteger, nullable=False),
        sa.Column("detail", sa.Text),  # the pipeline row: tables, marks, conflicts (JSON)
        schema=schema,
    )


class Progress:
    """Reads and writes one pipeline's rows of the progress table."""

    def __init__(self, table: sa.Table, pipeline: str) -> None:
        self.table = table
        self.pipeline = pipeline

    def read(self, connection: Any, table: str) -> tuple[Written, bool]:
        """How far the pipeline's writes to ``table`` reached, and whether its target table
        is being loaded (``record``)."""
        import sqlalchemy as sa

        row = connection.execute(
            sa.select(self.table).where(*self._row(table))
        ).mappings().first()  # fmt: skip
        if row is None:
            return NOTHING_WRITTEN, False
        done = row["position"] if row["position"] >= 0 else None  # -1: None (``_upsert``)
        mark = Written(done, row["seq"], row["part_pos"], row["part_seq"])
        return mark, row["detail"] == LOADING

    def record(
        self, connection: Any, table: str, mark: Written, text: str, loading: bool = False
    ) -> None:
        """Set ``table``'s row to ``mark`` (in the caller's transaction). ``loading``: the
        target table was created empty while the source's table has rows a load writes
        later, so a change may meet a row not loaded yet (``sink.py``)."""
        self._upsert(connection, table, mark, text, LOADING if loading else None)

    def loaded(self, connection: Any, table: str) -> None:
        """Clear ``table``'s loading flag (``record``), its mark unchanged."""
        connection.execute(self.table.update().where(*self._row(table)).values(detail=None))

    def record_pipeline(
        self,
        connection: Any,
        position: Position,
        tables: Sequence[str],
        marks: RefreshMarks | None,
        conflicts: int,
    ) -> None:
        """Set the pipeline's own row: the position every captured table reached."""
        detail = {
            "tables": sorted(tables),
            "conflicts": conflicts,
            **(marks or RefreshMarks()).to_document(),
        }
        mark = Written(position.value, -1, None, -1)
        self._upsert(connection, PIPELINE_ROW, mark, position.text, json.dumps(detail))

    def reached(self, connection: Any) -> tuple[Position, dict[str, Any]] | None:
        """The pipeline's position and detail (None: it has written nothing yet)."""
        import sqlalchemy as sa

        row = connection.execute(
            sa.select(self.table).where(*self._row(PIPELINE_ROW))
        ).mappings().first()  # fmt: skip
        if row is None:
            return None
        return Position(row["position"], row["position_text"]), json.loads(row["detail"])

    def forget(self, connection: Any, table: str) -> None:
        """Delete ``table``'s row (its target table was dropped or moved aside)."""
        connection.execute(self.table.delete().where(*self._row(table)))

    def _row(self, table: str) -> list[Any]:
        return [self.table.c.pipeline == self.pipeline, self.table.c.table_name == table]

    def _upsert(
        self, connection: Any, table: str, mark: Written, text: str, detail: str | None
    ) -> None:
        values = {
            "position": mark.done if mark.done is not None else -1,
            "position_text": text,
            "seq": mark.seq,
            "part_pos": mark.part_pos,
            "part_seq": mark.part_seq,
            "detail": detail,
        }
        updated = connection.execute(self.table.update().where(*self._row(table)).values(values))
        if updated.rowcount == 0:
            row = {"pipeline": self.pipeline, "table_name": table, **values}
            connection.execute(self.table.insert().values(row))


def pipelines_covering(connection: Any, schema: str | None, table: str) -> dict[str, Position]:
    """Per pipeline writing source table ``table`` into this target, the position it
    reached (its own progress row)."""
    import sqlalchemy as sa

    progress = progress_table(sa.MetaData(), schema)
    rows = connection.execute(
        sa.select(progress).where(progress.c.table_name == PIPELINE_ROW)
    ).mappings()  # fmt: skip
    return {
        row["pipeline"]: Position(row["position"], row["position_text"])
        for row in rows
        if any(same_table(table, t) for t in json.loads(row["detail"] or "{}").get("tables", ()))
    }
