"""Opt-Miner: tree-guided synthesis of optimisation problems, retrieval and solver-checked scoring.

Modules (import them directly; this package imports nothing heavy):

- ``tree``: the typed problem tree (scenario, model and technique subtrees), ``render_text``, ``to_model``;
- ``templates``: six scenario templates and six technique templates;
- ``operators``: subtree ``union``, subtree ``transfer`` and knowledge ``fog``;
- ``solve``: HiGHS (``scipy.optimize.milp``) and CBC (PuLP) solves of a tree, and their agreement check;
- ``synth``: seeded synthesis of verified instances, the document corpus, a scripted modeller;
- ``retrieval``: ``Document``, ``BM25Corpus``, ``EmbeddingCorpus``, ``make_search_tool``;
- ``scorer``: sandboxed execution of a model's solver code and the tolerance-based reward;
- ``bench``: benchmark files (``en_question``/``en_answer``), the solving agent, resumable evaluation;
- ``cli``: ``icml26 optminer synthesize|eval``.

Paper: "Opt-Miner: Empowering Information-Seeking Agent with Tree-Guided Data Synthesis for Optimization
Modeling" (ICML 2026 poster 65154; no arXiv version). Reconstruction: everything beyond the paper's abstract (the tree schema, the templates,
the operators' details, the corpus and the reward) was chosen here; each module says what it chose.
The names below load on first use.
"""

from __future__ import annotations

from icml26.lazy import lazy_exports

_EXPORTS = {
    "ProblemTree": "tree", "new_scenario": "templates", "apply_technique": "templates",
    "union": "operators", "transfer": "operators", "fog": "operators", "solve_tree": "solve",
    "Instance": "synth", "synthesize": "synth", "build_corpus": "synth", "scripted_modeller": "synth",
    "Document": "retrieval", "BM25Corpus": "retrieval", "EmbeddingCorpus": "retrieval",
    "make_search_tool": "retrieval", "Score": "scorer", "Scorer": "scorer", "load_benchmark": "bench",
    "evaluate": "bench", "evaluate_folder": "bench",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
