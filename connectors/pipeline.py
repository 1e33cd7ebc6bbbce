"""A CDC pipeline built from a config file exactly as ``replcheck cdc run`` builds it.

The library entry point: the connection's password, table globs and the ``accept`` policy
matched against the source's tables, the hooks that complete what a log leaves out
(MariaDB's MINIMAL row images, values LogMiner cannot render), and the lake and state
directories checked before anything starts::

    with open_pipeline(Path("pipeline.yaml"), "shop") as pipeline:
        pipeline.run_until_caught_up()
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_core.files import check_output_dir
from cdc_core.pipeline.config import PipelineSetup, load_pipeline_config
from cdc_core.pipeline.loop import Pipeline, TransactionCallback
from connectors.registry import connector_for, log_source_for
from connectors.urls import parse_url

if TYPE_CHECKING:
    from connectors.database_target.sink import DatabaseSink

logger = logging.getLogger(__name__)


@contextmanager
def open_pipeline(
    config_path: Path,
    name: str,
    *,
    overrides: dict[str, str] | None = None,
    on_transaction: TransactionCallback | None = None,
) -> Iterator[Pipeline]:
    """The named pipeline of a config file, its source's reader closed at the end.

    Args:
        config_path: The YAML config file.
        name: The pipeline's name in it.
        overrides: ``path=value`` overrides, as ``--set`` gives them.
        on_transaction: Called with each transaction once it is durable in the lake.
    """
    setup = load_pipeline_config(config_path, name, overrides)
    if isinstance(setup.config.lake, Path):
        check_output_dir(setup.config.lake, f"pipelines.{name}: the target's lake")
    elif setup.config.lake is not None:  # an object store: its bucket answers, or exit 2
        setup.config.lake.check_reachable()
    check_output_dir(setup.config.state_dir, f"pipelines.{name}.state_dir")
    if not setup.target.is_lake:
        _check_target(setup)
    connection = setup.source
    password = connection.password.reveal() if connection.password else None
    assert connection.url is not None  # a pipeline's source is a database connection
    tables = setup.config.tables
    source = log_source_for(connection.url, password, list(tables.accept))
    # Globs (and the accept policy) are matched against the tables the source has now.
    globs = any(char in pattern for pattern in tables.accept for char in "*?[")
    listed = source.tables() if tables.policy == "accept" or globs else None
    config = replace(
        setup.config,
        tables=tables.as_logged(source.captured),
        fetch_missing=source.fetch_missing,
        fetch_unavailable={**source.fetch_unavailable},
    )
    logger.info("pipeline %s: %s -> %s", name, connection.display(), setup.target.display())
    sink = None if setup.target.is_lake else database_sink(setup, password)
    try:
        yield Pipeline(
            config,
            source.reader,
            source.snapshots,
            tables=listed,
            on_transaction=on_transaction,
            sink=sink,
        )
    finally:
        source.reader.close()
        if sink is not None:
            sink.engine.dispose()


def _check_target(setup: PipelineSetup) -> None:
    """A database target of a product the sink writes to (before the source is opened)."""
    from connectors.database_target.types import check_target_dialect

    assert setup.target.url is not None
    backend = parse_url(setup.target.url).backend
    check_target_dialect(backend, setup.target.display())


def database_sink(setup: PipelineSetup, source_password: str | None) -> DatabaseSink:
    """The sink of a pipeline whose target is a database: its tables get the types of the
    source columns' logical types (the source's connector reflects them)."""
    from connectors.database_target.sink import DatabaseSink
    from connectors.sql_target import build_engine

    target, source = setup.target, setup.source
    assert target.url is not None and source.url is not None
    target_password = target.password.reveal() if target.password else None
    dialect = connector_for(target.url, target_password).repair
    engine = build_engine(target.url, target_password, dialect)
    source_connector = connector_for(source.url, source_password)
    return DatabaseSink(
        engine,
        dialect,
        setup.config.name,
        source_connector.reflect,
        setup.target_options,
        target.display(),
    )
