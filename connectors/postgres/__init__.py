"""PostgreSQL: a snapshot source whose positions are LSNs (log reader to come)."""
