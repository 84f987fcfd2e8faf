"""Benchmarks run by ``icml26 bench``, each registered with ``@benchmark``.

Like experiments, these modules are imported by the CLI's discovery: heavy imports go inside
the benchmark function.
"""
