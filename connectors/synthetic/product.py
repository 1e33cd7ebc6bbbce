"""The synthetic source as the core sees it: a generated log (``synthetic:///?seed=1``),
for benches and tests, with no database to read snapshots from."""

from __future__ import annotations

from connectors.base import Lazy, ProductDescription

SYNTHETIC = ProductDescription(
    name="synthetic",
    schemes=("synthetic",),
    log_source=Lazy("connectors.synthetic.log_source:open_source"),
)
