"""Sensitive key parts in results: a keyed hash instead of the value.

A difference names its row by key. When a key column is sensitive, its value must not reach
``result.json`` or anything rendered from it, yet a reader must still tell rows apart and a
re-sync must still find them. So each sensitive key part becomes ``***#`` and 16 hex digits
of an HMAC-SHA256 of the value's canonical bytes (the hash contract's, so every engine's
display text of one value gives one token), under a secret that never enters the result:

- ``validation.mask_key`` (give it as ``${NAME}``) when set: tokens are then stable across
  runs, and any run's result can be re-synced;
- else a random secret per run, written beside the result as ``mask.key`` (mode 0600).

The result records only the secret's id (``mask_key_id``), so a re-sync can tell a wrong
key file from a right one. Without the secret a token cannot be tested against guesses.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cdc_core.config import Secret
from cdc_core.errors import ConfigError
from merkle.canonical import to_canonical_field
from merkle.layout import RowLayout
from validator.result import TOKEN_PREFIX, ComparisonResult, Difference, Key
from validator.resync.keys import parse_part

KEY_FILE = "mask.key"
_TOKEN_HEX = 16


@dataclass(frozen=True, slots=True)
class KeyMasker:
    """Turns sensitive key parts into tokens under one secret.

    Attributes:
        secret: The HMAC key.
        saved: Whether the secret must be written beside the result (a per-run one).
    """

    secret: bytes
    saved: bool = False

    @classmethod
    def for_run(cls, configured: Secret | None) -> KeyMasker:
        """The configured secret (``validation.mask_key``), else a fresh random one to save
        with the result."""
        if configured is not None:
            return cls(configured.reveal().encode("utf-8"))
        return cls(secrets.token_bytes(32), saved=True)

    @property
    def key_id(self) -> str:
        """Names the secret without revealing it (recorded in the result)."""
        return hashlib.sha256(b"replcheck mask key id\0" + self.secret).hexdigest()[:16]

    def token(self, comparison: str, column: str, canonical: bytes) -> str:
        """The token of one value of ``column`` (its canonical field bytes)."""
        message = b"\0".join([comparison.encode(), column.encode(), canonical])
        digest = hmac.new(self.secret, message, hashlib.sha256).hexdigest()
        return TOKEN_PREFIX + digest[:_TOKEN_HEX]

    def token_of_value(self, comparison: str, layout: RowLayout, column: str, value: object) -> str:
        """The token of a typed value of key column ``column``."""
        spec = next(c for c in layout.key_columns if c.name == column)
        return self.token(comparison, column, to_canonical_field(value, spec.ltype, layout.options))

    def mask_result(
        self, result: ComparisonResult, layout: RowLayout, sensitive: Iterable[str]
    ) -> ComparisonResult:
        """``result`` with every sensitive key part of every difference a token."""
        hidden = frozenset(sensitive) & set(layout.key)
        if not hidden:
            return result
        mask = _KeyMask(self, result.name, layout, hidden)
        return replace(
            result,
            differences=tuple(mask.difference(d) for d in result.differences),
            in_flight=tuple(mask.key(k) for k in result.in_flight),
        )

    def save_beside(self, result_file: Path) -> None:
        """Write a per-run secret as ``mask.key`` beside ``result_file`` (owner-only)."""
        if not self.saved:
            return
        path = result_file.with_name(KEY_FILE)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # never written through: a link planted there goes
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(self.secret.hex().encode() + b"\n")


@dataclass(frozen=True, slots=True)
class _KeyMask:
    masker: KeyMasker
    comparison: str
    layout: RowLayout
    hidden: frozenset[str]

    def key(self, key: Key) -> Key:
        return tuple(
            self.part(part, column) for part, column in zip(key, self.layout.key, strict=True)
        )

    def part(self, part: str | None, column: str) -> str | None:
        if part is None or column not in self.hidden:
            return part
        spec = next(c for c in self.layout.key_columns if c.name == column)
        try:
            value = parse_part(part, spec.ltype)
        except (ValueError, ArithmeticError, KeyError):
            return self.masker.token(self.comparison, column, b"text\0" + part.encode())
        return self.masker.token_of_value(self.comparison, self.layout, column, value)

    def difference(self, difference: Difference) -> Difference:
        return replace(difference, key=self.key(difference.key))


def is_token(part: str | None) -> bool:
    """Whether a key part of a result is a token (a masked sensitive value)."""
    return part is not None and part.startswith(TOKEN_PREFIX)


def masker_for_resync(
    configured: Secret | None, result_file: Path | None, key_id: str | None
) -> KeyMasker:
    """The secret a result's tokens were made with: the configured one, else the result's
    ``mask.key``; refused unless its id is the one the result records.

    Raises:
        ConfigError: No secret, or not the result's.
    """
    candidates: list[KeyMasker] = []
    if configured is not None:
        candidates.append(KeyMasker(configured.reveal().encode("utf-8")))
    if result_file is not None and (path := result_file.with_name(KEY_FILE)).is_file():
        candidates.append(KeyMasker(bytes.fromhex(path.read_text().strip())))
    for masker in candidates:
        if masker.key_id == key_id:
            return masker
    raise ConfigError(
        "the result masks sensitive key columns, and the secret it was masked with is not"
        f" here: put the {KEY_FILE} written beside that result.json back beside it, or set"
        " validation.mask_key to the value the validation ran with"
    )


def resolve(
    masker: KeyMasker,
    comparison: str,
    layout: RowLayout,
    keys: Sequence[Key],
    candidates: Iterable[tuple[object, ...]],
) -> dict[Key, tuple[object, ...]]:
    """Typed keys of the result keys holding tokens, found among ``candidates`` (typed keys
    read from the source and the target); keys not found are left out."""
    wanted = {key for key in keys if any(is_token(part) for part in key)}
    found: dict[Key, tuple[object, ...]] = {}
    if not wanted:
        return found
    mask = _KeyMask(masker, comparison, layout, frozenset(layout.key))
    signatures = {tuple(_signature(mask, key)): key for key in wanted}
    for typed in candidates:
        shown = tuple(
            None if value is None else masker.token_of_value(comparison, layout, column, value)
            for column, value in zip(layout.key, typed, strict=True)
        )
        key = signatures.get(shown)
        if key is not None:
            found[key] = typed
    return found


def _signature(mask: _KeyMask, key: Key) -> Iterable[str | None]:
    for part, column in zip(key, mask.layout.key, strict=True):
        yield part if is_token(part) else mask.part(part, column)
