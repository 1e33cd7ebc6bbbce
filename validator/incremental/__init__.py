"""Incremental validation: re-hash only the leaves that changed since the last validated run.

After a validated run of the hybrid engine under key-range leaves, both sides' leaf digests
are kept in the lake (``state.py``) with the position they hold for, P0, and a fingerprint
of everything that makes them comparable (``fingerprint.py``). A later run at P1 re-hashes,
on both sides, the leaves whose keys the lake's changelog shows changed between P0 and P1
(``changed_leaves.py``), the leaves that differed at P0, and a rotating share of the others
(``sweep.py``), and reuses the stored digests for the rest (``run.py``). A state that does
not apply (another configuration, another position lineage, a lake altered behind the
pipeline's back: ``lake_log.py``) makes a full run, with the reason in the result. What a
run proves is stated in the result (``guarantee.py``).
"""
