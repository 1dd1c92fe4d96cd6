"""Benchmarks of the method: recall quality on git histories (``synapse-retriever bench quality``).

Benchmarks are scripts, not timed tests; the test suite runs each on a tiny input.
"""
