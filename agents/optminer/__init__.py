"""Opt-Miner: tree-guided synthesis of optimisation problems, retrieval and solver-checked scoring.

Modules (import them directly; this package imports nothing heavy):

- ``tree``: the typed problem tree (scenario, model and technique subtrees), ``render_text``, ``to_model``;
- ``templates``: six scenario templates and six technique templates;
- ``operators``: subtree ``union``, subtree ``transfer`` and knowledge ``fog``;
- ``solve``: HiGHS (``scipy.optimize.milp``) and CBC (PuLP) solves of a tree, and their agreement check;
- ``synth``: seeded synthesis of verified instances, the document corpus, a scripted modeller;
- ``retrieval``: ``Document``, ``BM25Corpus``, ``EmbeddingCorpus``, ``make_search_tool``;
- ``scorer``: sandboxed execution of a model's solver code and the tolerance-based reward;
- ``bench``: benchmark files (``en_question``/``en_answer``), the solving agent, resumable evaluation.

Everything beyond the paper's abstract is a reconstruction (see the spec).
"""
