"""Trigger capture: changes recorded by row triggers into logging tables, read in commit order
(for products without a readable log; see the README, "Trigger capture")."""
