"""The demos' shop rows: customers and orders as SQL ``VALUES`` lists, the same in every
product's demo (seeded, so a demo's drift always hits rows that exist)."""

from __future__ import annotations

import random

NAMES = ("Ada", "Bob", "Chloé", "Dmitri", "Eun-ji", "Fatima", "Gareth", "Hana")


def customer_values(rng: random.Random, ids: range) -> str:
    """``(id, name, email, tier, signup, balance)`` per customer."""
    return ", ".join(
        f"({i}, '{rng.choice(NAMES)} {i}', 'user{i}@example.com', {rng.randrange(4)},"
        f" '2024-0{rng.randrange(1, 10)}-1{rng.randrange(10)}',"
        f" {rng.randrange(10**6)}.{i % 100:02d})"
        for i in ids
    )


def order_values(rng: random.Random, ids: range, customers: int) -> str:
    """``(id, customer_id, amount, placed_at, weight)`` per order: ``status`` and any other
    column are left to their defaults."""
    return ", ".join(
        f"({i}, {rng.randrange(1, customers + 1)}, {rng.randrange(100, 100_000) / 100:.2f},"
        f" '2025-{rng.randrange(1, 13):02d}-0{rng.randrange(1, 10)} 10:{rng.randrange(60):02d}:00."
        f"{rng.randrange(10**6):06d}', {rng.random() * 30:.6f})"
        for i in ids
    )
