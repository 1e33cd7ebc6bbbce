"""The local engine: a source database against its lake, with no Spark (``engine.py``)."""
