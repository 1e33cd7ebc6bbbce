"""PostgreSQL: a snapshot source whose positions are LSNs, and a CDC log source reading a
logical replication slot with pgoutput (``log_reader.py``)."""
