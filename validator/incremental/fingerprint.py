"""What makes stored leaf digests comparable with a new run's: a fingerprint of its parts.

Two runs' digests may be mixed only when both sides hash the same rows of the same tables
into the same leaves in the same way: the same source and lake table, compared columns and
their reconciled logical types, key, comparison options, leaves, sweep stripes, row hash
flavour and product version (which carries the hash contract's version). The parts are kept
by name so a mismatch can say which part differs.
"""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING

from cdc_core.config import mask_url
from connectors.pushdown import RangeLeaves
from validator.incremental.sweep import source_stripes

if TYPE_CHECKING:
    from validator.plan import ComparisonPlan

# The row hash both sides of the hybrid engine compute (connectors.pushdown).
HASH_FLAVOUR = "md5_hash64 of canonical row bytes"


def _product_version() -> str:
    try:
        return metadata.version("replcheck")
    except metadata.PackageNotFoundError:
        return "unknown"


def fingerprint_parts(plan: ComparisonPlan, scheme: RangeLeaves) -> dict[str, str]:
    """The named parts (no secret: the source URL is masked)."""
    reflected = plan.reflected
    layout = reflected.reconciled.layout
    lake = reflected.target_connection.lake
    return {
        "source": f"{mask_url(reflected.source.url)} {reflected.source_schema.table}",
        "target": f"{lake} {reflected.comparison.target.table}",
        "columns": repr([(c.name, repr(c.ltype)) for c in layout.columns]),
        "target_columns": repr([reflected.reconciled.target_names[n] for n in layout.names]),
        "key": repr(layout.key),
        "options": repr(layout.options),
        "leaves": f"range low={scheme.low} width={scheme.width} depth={scheme.depth}",
        "configured_depth": repr(plan.settings.depth),
        # The sweep's cursor is an offset in a stripe: another count would skip leaves.
        "sweep_stripes": str(source_stripes(scheme, plan.parallelism)),
        "hash": HASH_FLAVOUR,
        "product_version": _product_version(),
    }


def differing_parts(stored: dict[str, str], current: dict[str, str]) -> list[str]:
    """Names of the parts that differ (present on one side only included)."""
    return sorted(k for k in stored.keys() | current.keys() if stored.get(k) != current.get(k))
