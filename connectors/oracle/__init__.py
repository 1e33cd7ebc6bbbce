"""Oracle: LogMiner CDC source and AS OF SCN (flashback) snapshot reads."""
