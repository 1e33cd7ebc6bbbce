"""DuckDB: an embedded analytical database (snapshot source; it has no log to replicate)."""
