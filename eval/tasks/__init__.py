"""Data and task generators, environments and metrics of one method each (``icml26.eval.tasks``)."""
