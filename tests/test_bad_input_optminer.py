"""Bad input to Opt-Miner's library API (problem trees, templates, operators, synthesis, validation, retrieval,
decontamination, scoring, the R-GRPO config and reward functions, the toy task): each probe is one wrong value in
an otherwise valid call, and must be refused clearly. The CLI's own probes live with the CLI."""

from __future__ import annotations

import numpy as np
import pytest
from probes import Probe, check, ids

from icml26.agents.optminer import decontaminate, operators, retrieval, scorer, synth, templates, tree, validate
from icml26.eval.tasks import optminer as toy

DOCS = [retrieval.Document("a", "Big-M", "fixed charge setup cost"), retrieval.Document("b", "Peak", "peak demand")]


def _tree():
    return templates.new_scenario("production", np.random.default_rng(0))


def _row(**changes):
    return {"id": "x", "objective": 1.0, "text": "A sentence.", "documents": [], **changes}


def _config(**changes):
    from icml26.training.optminer.rgrpo import RGRPOConfig

    return RGRPOConfig(output_dir="/tmp/p7-rgrpo-probe", report_to="none", **changes)


def _rgrpo(name):
    from icml26.training.optminer import rgrpo

    return getattr(rgrpo, name)


PROBES = [
    # the problem tree and the templates
    Probe("Param-phrase-without-placeholder", lambda: tree.Param("cap", 4, "Capacity is four.", "s"), "phrase"),
    Probe("Variable-kind-unknown", lambda: tree.Variable("x", "real", 0, 1), "kind"),
    Probe("Variable-lb-above-ub", lambda: tree.Variable("x", "continuous", 2, 1), "lb"),
    Probe("Constraint-sense-unknown", lambda: tree.Constraint("c", [tree.Term("x")], "<", tree.Rhs(1)), "sense"),
    Probe("Objective-sense-maximise", lambda: tree.Objective("maximise", [tree.Term("x")], "Max."), "sense"),
    Probe("ProblemTree.from_dict-not-a-tree", lambda: tree.ProblemTree.from_dict({"id": "t"}), "data"),
    Probe("ProblemTree.from_json-not-json", lambda: tree.ProblemTree.from_json("{not json"), "text"),
    Probe("new_scenario-template-unknown", lambda: templates.new_scenario("scheduling", np.random.default_rng(0)),
          "template"),
    Probe("new_scenario-rng-int", lambda: templates.new_scenario("production", 0), "rng"),
    Probe("apply_technique-tag-unknown", lambda: templates.apply_technique(_tree(), "big-m",
                                                                           np.random.default_rng(0)), "tag"),
    Probe("distractor_documents-n-negative", lambda: templates.distractor_documents(np.random.default_rng(0), -1),
          "n"),
    # operators and synthesis
    Probe("union-same-tree-twice", lambda: operators.union(_tree(), _tree(), np.random.default_rng(0)), "a, b"),
    Probe("transfer-donor-without-technique", lambda: operators.transfer(_tree(), _tree(),
                                                                         np.random.default_rng(0)), "a"),
    Probe("fog-technique-unknown", lambda: operators.fog(_tree(), np.random.default_rng(0), technique="peak"),
          "technique"),
    Probe("synthesize-n-zero", lambda: synth.synthesize(0, progress=False), "n"),
    Probe("synthesize-fog_prob-above-one", lambda: synth.synthesize(1, fog_prob=1.5, progress=False), "fog_prob"),
    Probe("synthesize-rtol-negative", lambda: synth.synthesize(1, rtol=-1e-6, progress=False), "rtol"),
    Probe("synthesize-max_attempts-zero", lambda: synth.synthesize(1, max_attempts=0, progress=False),
          "max_attempts"),
    Probe("build_corpus-distractors-negative", lambda: synth.build_corpus([], distractors_per_doc=-1),
          "distractors_per_doc"),
    Probe("save-output-is-a-file", lambda: synth.save([], [], __file__), "out_dir"),
    Probe("scripted_modeller-tree-dict", lambda: synth.scripted_modeller({"id": "t"}, "text"), "tree"),
    # validation of synthesised instances
    Probe("validate-no-rows", lambda: validate.validate([]), "rows"),
    Probe("validate_instance-row-without-text", lambda: validate.validate_instance(
        {"id": "x", "objective": 1.0, "documents": []}), "row"),
    Probe("validate_instance-objective-not-a-number", lambda: validate.validate_instance(_row(objective="n/a")),
          "objective"),
    Probe("validate_instance-rtol-zero", lambda: validate.validate_instance(_row(), rtol=0.0), "rtol"),
    # retrieval
    Probe("BM25Corpus-no-documents", lambda: retrieval.BM25Corpus([]), "documents"),
    Probe("BM25Corpus-k-zero", lambda: retrieval.BM25Corpus(DOCS, k=0), "k"),
    Probe("BM25Corpus-stemmer-unknown", lambda: retrieval.BM25Corpus(DOCS, stemmer="klingon"), "stemmer"),
    Probe("BM25Corpus-documents-strings", lambda: retrieval.BM25Corpus(["fixed charge", "peak"]), "documents"),
    Probe("BM25Corpus.search-query-none", lambda: retrieval.BM25Corpus(DOCS).search(None), "query"),
    Probe("Document.from_dict-missing-text", lambda: retrieval.Document.from_dict({"id": "a", "title": "t"}), "data"),
    Probe("read_folder-missing-folder", lambda: retrieval.read_folder("/nonexistent/p7-docs"), "path"),
    Probe("make_search_tool-corpus-list", lambda: retrieval.make_search_tool(DOCS), "corpus"),
    # decontamination
    Probe("NgramIndex-n-zero", lambda: decontaminate.NgramIndex(["a b c"], n=0), "n"),
    Probe("contaminated-threshold-one", lambda: decontaminate.contaminated(["a"], {}, threshold=1.0), "threshold"),
    Probe("contaminated-train-a-string", lambda: decontaminate.contaminated("a question", {}), "train"),
    Probe("load_training_texts-missing-path", lambda: decontaminate.load_training_texts("/nonexistent/p7.jsonl"),
          "TRAIN"),
    # scoring
    Probe("Tolerance-rtol-zero", lambda: scorer.Tolerance(rtol=0.0), "rtol"),
    Probe("Tolerance-atol-nan", lambda: scorer.Tolerance(atol=float("nan")), "atol"),
    Probe("Scorer-format_weight-string", lambda: scorer.Scorer(format_weight="0.1"), "format_weight"),
    Probe("Scorer-time_limit-zero", lambda: scorer.Scorer(time_limit=0), "time_limit"),
    Probe("Scorer-tolerance-and-rtol", lambda: scorer.Scorer(1e-3, tolerance=scorer.Tolerance()), "tolerance"),
    Probe("Scorer.score-completion-bytes", lambda: scorer.Scorer().score(b"print(1)", 1.0), "completion"),
    Probe("parse_answer-nan", lambda: scorer.parse_answer(float("nan")), "answer"),
    # R-GRPO: config, rewards, advantages, masks
    Probe("RGRPOConfig-reward_tolerance-negative", lambda: _config(reward_tolerance=-1e-4), "reward_tolerance"),
    Probe("RGRPOConfig-tool_mask_mismatch-unknown", lambda: _config(tool_mask_mismatch="ignore"),
          "tool_mask_mismatch"),
    Probe("RGRPOConfig-generation_backend-unknown", lambda: _config(generation_backend="sglang"),
          "generation_backend"),
    Probe("make_answer_reward-tolerance-zero", lambda: _rgrpo("make_answer_reward")(tolerance=0.0), "tolerance"),
    Probe("make_answer_reward-scorer-not-callable", lambda: _rgrpo("make_answer_reward")(scorer=1.0), "scorer"),
    Probe("make_retrieval_bonus-bonus-negative", lambda: _rgrpo("make_retrieval_bonus")(-0.5), "bonus"),
    Probe("group_advantages-num_generations-not-dividing",
          lambda: _rgrpo("group_advantages")([1.0, 0.0, 1.0], 2), "num_generations"),
    Probe("group_advantages-scale_rewards-unknown",
          lambda: _rgrpo("group_advantages")([1.0, 0.0], 2, scale_rewards="std"), "scale_rewards"),
    Probe("align_tool_mask-policy-unknown", lambda: _rgrpo("align_tool_mask")([[1, 2]], [[1, 1]], policy="drop"),
          "policy"),
    Probe("align_tool_mask-rows-differ", lambda: _rgrpo("align_tool_mask")([[1, 2]], [[1, 1], [1]]), "tool_mask"),
    Probe("align_tool_mask-mask-too-long", lambda: _rgrpo("align_tool_mask")([[1, 2]], [[1, 1, 1]]), "tool_mask"),
    # the toy task
    Probe("make_toy_world-n_plants-zero", lambda: toy.make_toy_world(0, n_plants=0), "n_plants"),
    Probe("make_toy_world-n_plants-too-many", lambda: toy.make_toy_world(0, n_plants=10_000), "n_plants"),
    Probe("make_tasks-plant-unknown", lambda: toy.make_tasks({"A10": 12}, ["B20"], __import__("random").Random(0), 1),
          "plants"),
    Probe("make_toy_search-k-zero", lambda: toy.make_toy_search(None, k=0), "k"),
    Probe("ToyRecipe-num_generations-one", lambda: toy.ToyRecipe(num_generations=1), "num_generations"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
