"""Tasks, metrics, reproduction experiments and benchmarks (``icml26.eval``)."""
