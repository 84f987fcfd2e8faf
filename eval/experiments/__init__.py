"""One reproduction experiment per paper, ``<key>.py``, each registered with ``@experiment``.

Modules here are imported by ``icml26 list``, which must answer without importing torch:
import heavy libraries inside ``run``, never at module level.
"""
