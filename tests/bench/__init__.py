"""Benchmarks: `make bench` (python -m tests.bench)."""
