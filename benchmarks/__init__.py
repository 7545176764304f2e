"""Benchmarks for dp_infer: ``python -m benchmarks [--quick]`` (writes benchmarks/results/)."""
