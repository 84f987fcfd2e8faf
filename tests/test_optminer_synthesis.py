"""Opt-Miner synthesis: problem trees, templates, operators, solver validity."""

import re

import numpy as np
import pytest

from icml26.agents.optminer.operators import fog, key_fact, transfer, union, union_differs
from icml26.agents.optminer.retrieval import BM25Corpus
from icml26.agents.optminer.solve import agree, relative_error, verify
from icml26.agents.optminer.synth import build_corpus, draw_tree, save, scripted_modeller, synthesize, to_dataset
from icml26.agents.optminer.templates import SCENARIOS, TECHNIQUES, apply_technique, new_scenario
from icml26.agents.optminer.tree import (
    Constraint,
    ModelSubtree,
    Objective,
    Param,
    ProblemTree,
    Rhs,
    Scenario,
    Term,
    Variable,
    fmt,
    read_param,
)
from icml26.agents.optminer.validate import TextError, build_and_solve


def hand_built_lp() -> ProblemTree:
    """max 3x + 2y s.t. x + y <= 4, x + 3y <= 6, x, y >= 0 (optimum 12 at (4, 0))."""
    sc = Scenario("s", "production", "manufacturing", "Test Works", ["x", "y"], "Test Works makes x and y.",
                  ["s.x", "s.y"], ["units of x", "units of y"], "units", "yields a profit of ${v}", "max", "profit")
    params = {k: Param(k, v, f"Coefficient {k} is {{v}}.", "s") for k, v in
              [("px", 3), ("py", 2), ("cap1", 4), ("cap2", 6), ("ay", 3)]}
    model = ModelSubtree(
        [Variable("s.x", "continuous", 0, 100), Variable("s.y", "continuous", 0, 100)],
        Objective("max", [Term("s.x", 1, "px"), Term("s.y", 1, "py")], "Maximise profit."),
        [Constraint("c1", [Term("s.x"), Term("s.y")], "<=", Rhs(1, "cap1")),
         Constraint("c2", [Term("s.x"), Term("s.y", 1, "ay")], "<=", Rhs(1, "cap2"))])
    return ProblemTree("lp", [sc], model, params=params)


def test_hand_built_lp_both_solvers():
    tree = hand_built_lp()
    ok, highs, cbc = verify(tree)
    assert ok and highs.objective == pytest.approx(12.0) and cbc.objective == pytest.approx(12.0)
    assert highs.values["s.x"] == pytest.approx(4.0) and highs.values["s.y"] == pytest.approx(0.0)
    # coefficients follow the parameters: doubling px doubles the optimum
    assert tree.to_model({"px": 6}).solve_highs().objective == pytest.approx(24.0)


def test_tree_json_round_trip_and_deterministic_text():
    tree = new_scenario("facility", np.random.default_rng(3))
    apply_technique(tree, "fixed_charge", np.random.default_rng(4))
    again = ProblemTree.from_json(tree.to_json())
    assert again.render_text() == tree.render_text()
    assert again.to_json() == tree.to_json()
    other = new_scenario("facility", np.random.default_rng(3))
    apply_technique(other, "fixed_charge", np.random.default_rng(4))
    assert other.render_text() == tree.render_text()
    with pytest.raises(ValueError, match="ProblemTree.from_dict: data: expected a problem-tree dict"):
        ProblemTree.from_dict({"id": "x"})


def test_every_number_is_readable_from_the_text():
    tree = new_scenario("production", np.random.default_rng(0))
    apply_technique(tree, "piecewise", np.random.default_rng(1))
    text = tree.render_text()
    for param in tree.params.values():
        assert read_param(param, text) == pytest.approx(param.value), param.key
    assert fmt(3.0) == "3" and fmt(2.5) == "2.5"


@pytest.mark.parametrize("template", sorted(SCENARIOS))
def test_scenarios_with_each_technique_are_valid(template):
    rng = np.random.default_rng(len(template))
    plain = new_scenario(template, rng)
    assert verify(plain)[0], f"{template} without technique"
    applied = 0
    for tag in TECHNIQUES:
        tree = new_scenario(template, rng)
        try:
            technique = apply_technique(tree, tag, rng)
        except ValueError as exc:
            assert "with a free target" in str(exc)
            continue
        applied += 1
        assert technique.tag == tag and technique.scenario == tree.scenarios[0].id
        assert any(c.technique == tag for c in tree.model.constraints) or tag in ("fixed_charge",)
        ok, highs, cbc = verify(tree)
        if highs.status == "infeasible":  # a technique may make a scenario infeasible: both solvers must say so
            assert cbc.status == "infeasible"
            continue
        assert ok, (template, tag, highs, cbc)
    assert applied >= 5


def test_unknown_template_and_technique_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="template: expected one of .*got 'bakery'"):
        new_scenario("bakery", rng)
    with pytest.raises(ValueError, match="tag: expected one of .*got 'sos3'"):
        apply_technique(new_scenario("diet", rng), "sos3", rng)


def test_union_semantics():
    rng = np.random.default_rng(11)
    differs, made = 0, 0
    while made < 10:
        a = new_scenario(str(rng.choice(list(SCENARIOS))), rng)
        b = new_scenario(str(rng.choice(list(SCENARIOS))), rng)
        try:
            child = union(a, b, rng)
        except ValueError:
            continue
        made += 1
        assert {s.id for s in child.scenarios} == {a.scenarios[0].id, b.scenarios[0].id}
        links = [c for c in child.model.constraints if c.technique == "link"]
        assert len(links) >= 1 and child.links
        assert verify(child)[0]
        differs += union_differs(child, a, b)
        assert len(a.scenarios) == 1 and len(b.scenarios) == 1  # parents untouched
    assert differs >= 8


def test_union_refuses_shared_site():
    rng = np.random.default_rng(0)
    a = new_scenario("diet", rng, site="Alder")
    b = new_scenario("diet", rng, site="Alder")
    with pytest.raises(ValueError, match="disjoint"):
        union(a, b, rng)


def test_transfer_moves_technique_to_new_scenario():
    rng = np.random.default_rng(5)
    a = new_scenario("production", rng)
    apply_technique(a, "fixed_charge", rng)
    b = new_scenario("transportation", rng)
    child = transfer(a, b, rng)
    moved = [t for t in child.techniques if t.tag == "fixed_charge"]
    assert len(moved) == 1 and moved[0].scenario == b.scenarios[0].id
    assert set(moved[0].targets) <= set(b.scenarios[0].primary)
    assert not b.techniques  # the input tree is untouched
    assert verify(child)[0]
    with pytest.raises(ValueError, match="transfer: a: expected a donor with a technique subtree"):
        transfer(b, a, rng)
    with pytest.raises(ValueError, match="no technique 'piecewise'"):
        transfer(a, b, rng, tag="piecewise")


def test_fog_hides_key_parameter_and_moves_it_to_one_document():
    rng = np.random.default_rng(2)
    instances, _ = synthesize(12, seed=4, fog_prob=1.0, progress=False)
    corpus = build_corpus(instances, seed=4)
    search = BM25Corpus(corpus, k=3)
    checked = 0
    for inst in instances:
        tree = inst.problem_tree()
        for tech in (t for t in tree.techniques if t.fogged):
            value, fact = fmt(tree.params[tech.key_param].value), key_fact(tree, tech)
            assert re.search(rf"(?<![\d.]){re.escape(value)}(?![\d]|\.\d)", inst.text) is None
            assert fact not in inst.text
            assert sum(fact in d.text for d in corpus) == 1
            assert any(d.title == tech.document.title for d in search.search(tech.fog_text))
            checked += 1
    assert checked >= 10
    # fog never changes the model: same optimum
    tree = new_scenario("knapsack", rng)
    apply_technique(tree, "fixed_charge", rng)
    fogged = fog(tree, rng)
    assert fogged.fogged_params() and not tree.fogged_params()
    assert agree(verify(fogged)[1].objective, verify(tree)[1].objective)


def test_fogging_creates_a_gap_that_retrieval_closes():
    gaps = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        tree = new_scenario("production", rng)
        apply_technique(tree, "fixed_charge", rng)
        fogged = fog(tree, rng)
        reference = verify(fogged)[1].objective
        assert scripted_modeller(tree, tree.render_text(), reference=reference).correct  # unfogged: text suffices
        blind = scripted_modeller(fogged, fogged.render_text(), reference=reference)
        assert blind.missing == [fogged.techniques[0].key_param]
        gaps += not blind.correct
        assert scripted_modeller(fogged, fogged.render_text(), fogged.documents(), reference=reference).correct
    assert gaps >= 3  # a setup cost usually matters; when it does not, hiding it leaves no gap


def test_synthesis_validity_and_determinism(tmp_path):
    instances, stats = synthesize(30, seed=7, progress=False)
    assert len(instances) == 30 and stats["attempts"] >= 30
    for inst in instances:
        tree = inst.problem_tree()
        fresh = tree.to_model().solve_cbc()
        assert fresh.optimal and relative_error(fresh.objective, inst.objective) < 1e-6, inst.id
        assert inst.text == tree.render_text()
    assert any(i.fogged for i in instances) and any(not i.fogged for i in instances)
    assert any(len(i.scenarios) == 2 for i in instances)
    again, _ = synthesize(5, seed=7, progress=False)
    assert [i.text for i in again] == [i.text for i in instances[:5]]
    ds = to_dataset(instances)
    assert {"text", "documents", "objective", "tree"} <= set(ds.column_names) and len(ds) == 30
    out = save(instances, build_corpus(instances, 7), tmp_path / "syn")
    corpus = BM25Corpus.from_folder(out / "corpus")
    assert len(corpus) > len(instances)
    with pytest.raises(FileExistsError, match="already exist"):
        save(instances, [], out)


def test_no_two_sentences_of_an_instance_differ_only_by_a_number():
    """A stated quantity is found by its sentence, never by its place: masking every number (but the index that
    names a period of the staffing cycle) leaves each instance's sentences distinct, technique sentences
    included (two absolute-value techniques at one site once gave two penalty sentences equal up to the number:
    each penalty now names its total, and the validator reads it by that name)."""
    value = re.compile(r"(?<!period )(?<![\d.])\d+(?:\.\d+)?")
    drawn = 0
    for i in range(400):  # synthesis before its solver checks: the text is what this reads
        try:
            text = draw_tree(np.random.default_rng([0, i, 0])).render_text()
        except ValueError:
            continue
        drawn += 1
        sentences = [value.sub("#", s) for line in text.split("\n") for s in re.split(r"(?<=\.)\s+", line)]
        repeated = {s for s in sentences if sentences.count(s) > 1}
        assert not repeated, (i, repeated)
    assert drawn >= 350
    tree, grafted, rng = new_scenario("facility", np.random.default_rng(0)), 0, np.random.default_rng(1)
    while True:  # as many absolute-value techniques at one site as its free targets allow
        try:
            apply_technique(tree, "absolute_value", rng)
        except ValueError as error:
            assert "with a free target for technique 'absolute_value'" in str(error)
            break
        grafted += 1
    text = tree.render_text()
    penalties = [s for s in text.splitlines() if "costs a penalty" in s]
    assert grafted >= 2 and len(penalties) == grafted and len({value.sub("#", s) for s in penalties}) == grafted
    moved = text  # every penalty moved to the end, in reverse order: each is read by the total it names
    for sentence in penalties:
        moved = moved.replace(sentence, "")
    moved = "\n".join([*(s for s in moved.splitlines() if s), *reversed(penalties)])
    documents = [d.to_dict() for d in tree.documents()]
    status, objective = build_and_solve(moved, documents)
    assert status == "optimal" and objective == pytest.approx(tree.to_model().solve_highs().objective, rel=1e-6)
    with pytest.raises(TextError, match="no reference level"):  # a penalty twice is not read as a second total's
        build_and_solve(text + "\n" + penalties[0], documents)


def test_synthesize_rejects_bad_arguments():
    with pytest.raises(ValueError, match="positive int"):
        synthesize(0)
    with pytest.raises(ValueError, match="fog_prob: expected a probability"):
        synthesize(1, fog_prob=2.0)


def test_cli_synthesize(tmp_path, capsys):
    from datasets import load_from_disk

    from icml26.cli import main

    out = tmp_path / "syn"
    assert main(["optminer", "synthesize", "--n", "6", "--out", str(out), "--seed", "3", "--no-progress"]) == 0
    ds = load_from_disk(str(out / "dataset"))
    assert len(ds) == 6 and (out / "stats.json").exists() and any((out / "corpus").iterdir())
    assert main(["optminer", "synthesize", "--n", "6", "--out", str(out), "--no-progress"]) == 2
    assert "--out: expected a folder without dataset/ and corpus/ (or --overwrite)" in capsys.readouterr().err


def test_synthesis_is_the_same_with_worker_processes():
    serial, _ = synthesize(4, seed=9, progress=False)
    parallel, _ = synthesize(4, seed=9, workers=2, progress=False)
    assert [i.tree for i in parallel] == [i.tree for i in serial]


def test_synthesis_workers_die_with_a_sigkilled_run():
    """A caller's time-out SIGKILLs the run: its synthesis workers must not keep computing, re-parented to init."""
    import subprocess
    import sys

    from orphans import children, survivors_of_sigkill

    code = ("from icml26.agents.optminer.synth import synthesize\n"
            "synthesize(100000, seed=0, workers=2, progress=False)\n")
    run = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    assert survivors_of_sigkill(run, lambda: pids if len(pids := children(run.pid)) >= 2 else []) == []
