"""A pipeline's database target: its tables (``tables.py``, types from ``types.py``), its
progress table (``progress.py``) and the sink applying batches exactly once (``sink.py``)."""
