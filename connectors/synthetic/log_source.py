"""The synthetic source as a pipeline source: ``synthetic:///?seed=1&transactions=1000``."""

from __future__ import annotations

from collections.abc import Sequence

from connectors.model import LogSource
from connectors.synthetic.log_reader import SyntheticSource, pace_of_url, spec_of_url
from connectors.synthetic.workload import Workload


def open_source(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """The ``LogSource`` of a ``synthetic:`` URL."""
    source = SyntheticSource(Workload(spec_of_url(url)), pace_of_url(url))
    return LogSource(source, source, lambda: list(source.workload.spec.table_names))
