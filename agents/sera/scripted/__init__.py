"""An offline, seeded stand-in for SERA's teacher model, so the pipeline runs without an LLM.

- ``teacher``: :class:`ScriptedTeacher`, a policy answering rollouts, synthetic-issue and judge requests;
- ``edits``: the edit families it applies to one function (guard clauses, checks, renames, ...).

Names load on first use (no heavy imports).
"""

from __future__ import annotations

from icml26.lazy import lazy_exports

_EXPORTS = {"ScriptedTeacher": "teacher", "EditSpec": "edits", "FAMILIES": "edits"}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
