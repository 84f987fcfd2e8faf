"""icml26: ICML 2026 methods as installable, tested software."""
__version__ = "0.1.0"
