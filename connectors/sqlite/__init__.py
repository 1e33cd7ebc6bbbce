"""SQLite: an embedded database (snapshot source; it has no log to replicate)."""
