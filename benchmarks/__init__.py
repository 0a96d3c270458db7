"""Whimbrel's benchmarks: ``python -m benchmarks`` (or ``./scripts/bench``)."""
