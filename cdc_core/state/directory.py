"""The files of one pipeline's state directory, named in one place.

::

    <state_dir>/checkpoint    the pipeline's checkpoint (``cdc_core.pipeline.checkpoint``)
    <state_dir>/lock          who runs the pipeline now (``cdc_core.state.lock``)
    <state_dir>/images/       the row image store (``cdc_core.rebuild.image_store``)
    <state_dir>/spill/        the transaction buffer's spill segments (``cdc_core.buffer.spill``)

The directory is local: the lake may live in an object store, the state never does
(docs/object-storage.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StateDirectory:
    """One pipeline's state directory (its ``state_dir``)."""

    root: Path

    @property
    def checkpoint(self) -> Path:
        return self.root / "checkpoint"

    @property
    def checkpoint_temporary(self) -> Path:
        """Where a new checkpoint is written before it replaces the old one."""
        return self.root / ".checkpoint.tmp"

    @property
    def lock(self) -> Path:
        return self.root / "lock"

    @property
    def images(self) -> Path:
        return self.root / "images"

    @property
    def spill(self) -> Path:
        return self.root / "spill"
