"""Benchmarks of the method: recall quality on real git histories (``synapse bench quality``).

Benchmarks are scripts, not timed tests; the test suite runs each on a tiny input.
"""
