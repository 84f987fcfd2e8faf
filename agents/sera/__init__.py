"""SERA: soft-verified generation of agent trajectories from any Python repository (arXiv 2601.20789).

The pipeline stages are modules of this package (each importable on its own):

- ``seeds``: task seeds, the functions of a repository and its approximate call graph;
- ``prompts``: the SWE-agent instruction, the vague issue templates, the synthetic-issue and judge requests;
- ``pipeline``: instance planning, the two rollouts per instance and :func:`generate` (resumable);
- ``verification``: changed lines, patch recall (soft verification) and the trajectory filters;
- ``exporter``: the ledger of finished instances and the export to a ``datasets.Dataset`` and JSONL;
- ``scripted``: an offline, seeded stand-in for the teacher model (:class:`ScriptedTeacher`);
- ``cli``: ``icml26 sera generate|export|train``.

The names below are loaded on first use, so ``import icml26.agents.sera`` stays light.
"""

from __future__ import annotations

from icml26.lazy import lazy_exports

_EXPORTS = {
    "Instance": "pipeline", "generate": "pipeline", "plan_instances": "pipeline", "resolve_backend": "pipeline",
    "run_instance": "pipeline",
    "GenerateSummary": "exporter", "Ledger": "exporter", "export": "exporter", "resolve_duplicates": "exporter",
    "FilterConfig": "verification", "changed_lines": "verification", "count_changed_lines": "verification",
    "filter_trajectory": "verification", "patch_recall": "verification", "verify": "verification",
    "RepoError": "seeds", "SeedFunction": "seeds", "find_seed_functions": "seeds",
    "make_git_repo_from_package": "seeds",
    "VAGUE_TEMPLATES": "prompts", "load_demonstrations": "prompts",
    "ScriptedTeacher": "scripted.teacher",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
