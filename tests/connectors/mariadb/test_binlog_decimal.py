"""The binlog's packed DECIMAL read back exactly: every precision and scale MariaDB allows,
positive and negative, against an encoder written from MySQL's ``decimal2bin``."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from connectors.mariadb.binlog.values import _new_decimal

_GROUP_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes for 0..9 digits (decimal.c, dig2bytes)


def packed_decimal(text: str, precision: int, scale: int) -> bytes:
    """The binary DECIMAL(precision, scale) of the fixed-point ``text``: integral digits in
    groups of 9 from the point leftwards, fraction digits from the point rightwards, each
    group big-endian in the fewest bytes; the sign bit set for positives, and every bit of a
    negative inverted."""
    negative = text.startswith("-")
    whole, _, fraction = text.lstrip("-").partition(".")
    digits = precision - scale
    integral = whole.rjust(digits, "0")[-digits:] if digits else ""
    fraction = fraction.ljust(scale, "0")
    head = len(integral) % 9
    groups = [integral[:head]] if head else []
    groups += [integral[i : i + 9] for i in range(head, len(integral), 9)]
    groups += [fraction[i : i + 9] for i in range(0, len(fraction), 9)]
    raw = b"".join(int(group).to_bytes(_GROUP_BYTES[len(group)], "big") for group in groups)
    raw = bytes([raw[0] ^ 0x80]) + raw[1:]
    return bytes(b ^ 0xFF for b in raw) if negative else raw


def _random_text(rng: random.Random, precision: int, scale: int) -> str:
    digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(0, precision))) or "0"
    digits = digits.rjust(scale + 1, "0")
    text = f"{digits[:-scale]}.{digits[-scale:]}" if scale else digits
    return ("-" if rng.random() < 0.4 else "") + text


@pytest.mark.parametrize("precision", [1, 2, 9, 10, 18, 19, 27, 38, 65])
def test_every_scale_reads_back_exactly(precision: int) -> None:
    rng = random.Random(precision)
    for scale in range(min(precision, 30) + 1):
        decode = _new_decimal(precision, scale)
        texts = [_random_text(rng, precision, scale) for _ in range(40)]
        texts += ["9" * (precision - scale) + ("." + "9" * scale if scale else "")]  # the max
        for text in texts:
            data = b"ab" + packed_decimal(text, precision, scale) + b"c"
            value, after = decode(data, 2)
            assert (value, str(value)) == (Decimal(text), str(Decimal(text))), (scale, text)
            assert after == len(data) - 1
