"""A generated, deterministic source log for tests, benchmarks and demos of the pipeline."""
