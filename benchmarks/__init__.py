"""Benchmarks: `python -m benchmarks [--quick] [NAME ...]`; each bench_*.py has `run(quick) -> dict`."""
