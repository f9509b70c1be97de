"""Runnable experiments: reproductions of the papers\x27 tables and throughput benchmarks."""
