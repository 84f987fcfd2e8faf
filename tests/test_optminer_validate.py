"""Opt-Miner's text-faithfulness validator: models rebuilt from text and documents alone."""

import dataclasses
import json

import pytest

from icml26.agents.optminer.solve import MILP, bounds_bind
from icml26.agents.optminer.synth import synthesize
from icml26.agents.optminer.templates import new_scenario
from icml26.agents.optminer.validate import build_and_solve, validate, validate_instance

# Instance om-0-1 as the synthesiser wrote it before unstated bounds were removed: its tree bounded the
# Brampton -> Lakeside lane by Lakeside's demand (31), which the text never says, and stored 1187. A PuLP model
# written by hand from this text gives 1145 (39 units, three lots of 13, may go to Lakeside).
OLD_OM_0_1 = {
    "id": "om-0-1", "objective": 1187.0, "scenarios": ["facility"], "techniques": ["integrality"],
    "text": "\n".join([
        "Ashcombe Retail decides which depots to open among Ashford, Brampton, Corby to serve Riverside, Hilltop, "
        "Lakeside; a closed depot serves nothing and shipped amounts may be fractional.",
        "Ashcombe Retail can open a depot at Ashford for a fixed cost of $274.",
        "Ashcombe Retail serves one unit of Riverside's demand from Ashford for $12.",
        "Ashcombe Retail serves one unit of Hilltop's demand from Ashford for $6.",
        "Ashcombe Retail serves one unit of Lakeside's demand from Ashford for $5.",
        "Ashcombe Retail can open a depot at Brampton for a fixed cost of $285.",
        "Ashcombe Retail serves one unit of Riverside's demand from Brampton for $12.",
        "Ashcombe Retail serves one unit of Hilltop's demand from Brampton for $9.",
        "Ashcombe Retail serves one unit of Lakeside's demand from Brampton for $1.",
        "Ashcombe Retail can open a depot at Corby for a fixed cost of $320.",
        "Ashcombe Retail serves one unit of Riverside's demand from Corby for $3.",
        "Ashcombe Retail serves one unit of Hilltop's demand from Corby for $3.",
        "Ashcombe Retail serves one unit of Lakeside's demand from Corby for $2.",
        "A depot of Ashcombe Retail at Ashford can serve at most 65 units.",
        "A depot of Ashcombe Retail at Brampton can serve at most 85 units.",
        "A depot of Ashcombe Retail at Corby can serve at most 34 units.",
        "Ashcombe Retail must supply at least 38 units to Riverside.",
        "Ashcombe Retail must supply at least 39 units to Hilltop.",
        "Ashcombe Retail must supply at least 31 units to Lakeside.",
        "At Ashcombe Retail, the number of units sent by Ashcombe Retail from Brampton to Lakeside must follow "
        "lot-size rule MR-2942.",
        "Minimise the total opening and delivery cost of Ashcombe Retail, including any setup costs, fees and "
        "penalties stated. Report the optimal objective value."]),
    "documents": [{"id": "MR-2942", "title": "Lot-size rule MR-2942", "text": (
        "Lot-size rule MR-2942 for Ashcombe Retail. At Ashcombe Retail, the number of units sent by Ashcombe Retail "
        "from Brampton to Lakeside must be a whole multiple of 13. Modelling note: Quantities produced in whole lots "
        "are modelled with an integer number of lots n and quantity = lot size x n (integrality constraint).")}],
}


def rows(n, seed=0):
    instances, _ = synthesize(n, seed, progress=False)
    return [dataclasses.asdict(i) for i in instances]


@pytest.fixture(scope="module")
def sample():
    return rows(40, seed=0)


def test_the_issue_instance_differs_and_gives_the_hand_written_optimum():
    check = validate_instance(OLD_OM_0_1)
    assert check.status == "differs" and check.rebuilt == pytest.approx(1145.0) and check.stored == 1187.0
    fixed = validate_instance({**OLD_OM_0_1, "objective": 1145.0})
    assert fixed.ok


def test_fogged_fact_comes_from_the_document_only():
    no_doc = validate_instance({**OLD_OM_0_1, "documents": []})
    assert no_doc.status == "unreadable" and "MR-2942" in no_doc.reason
    other = {**OLD_OM_0_1["documents"][0], "text": OLD_OM_0_1["documents"][0]["text"].replace("of 13", "of 7")}
    assert build_and_solve(OLD_OM_0_1["text"], [other])[1] != pytest.approx(1145.0)


def test_unread_sentences_and_unbounded_big_m_fail():
    text = OLD_OM_0_1["text"].replace("Ashcombe Retail must supply at least 31 units to Lakeside.",
                                      "Ashcombe Retail must supply roughly 31 units to Lakeside.")
    check = validate_instance({**OLD_OM_0_1, "text": text})
    assert check.status == "unreadable" and "unread sentence" in check.reason
    # a staffing problem whose text does not bound the starts gives a fixed charge no big-M: refused, not guessed
    import numpy as np

    from icml26.agents.optminer.templates import apply_technique

    tree = new_scenario("staffing", np.random.default_rng(0))
    apply_technique(tree, "fixed_charge", np.random.default_rng(1))
    text = "\n".join(line for line in tree.render_text().splitlines() if "can start a shift" not in line)
    check = validate_instance({"id": "t", "objective": 0.0, "text": text, "documents": [d.to_dict()
                                                                                      for d in tree.documents()]})
    assert check.status == "unreadable" and "states no bound" in check.reason


def test_synthesised_sample_matches_its_text_per_template(sample):
    report = validate(sample)
    assert report["checked"] == 40 and report["differ"] == 0, report["failures"][:3]
    assert set(report["by_template"]) == {"production", "diet", "transportation", "knapsack", "facility", "staffing"}
    assert sum(v["checked"] for v in report["by_technique"].values()) >= 40
    wrong = validate([{**sample[0], "objective": sample[0]["objective"] + 1.0}])  # negative control
    assert wrong["differ"] == 1 and wrong["failures"][0]["status"] == "differs"


def test_no_unstated_bound_or_big_m_binds(sample):
    from icml26.agents.optminer.tree import ProblemTree

    for row in sample[:15]:
        tree = ProblemTree.from_json(row["tree"])
        assert not bounds_bind(tree, row["objective"]), row["id"]
        loose = MILP.from_tree(tree, loose=True)
        stated = {v.name for v in tree.model.variables if v.ub_param or v.kind == "binary"}
        assert all(ub == float("inf") for n, ub in zip(loose.names, loose.ub) if n not in stated)
    # negative control: an unstated bound on the busiest lane of a transportation optimum binds
    import numpy as np

    tree = new_scenario("transportation", np.random.default_rng(3))
    best = tree.to_model().solve_highs()
    busiest = max(best.values, key=best.values.get)
    tree.var(busiest).ub = 1.0
    assert tree.var(busiest).ub_param is None and bounds_bind(tree, tree.to_model().solve_highs().objective)


def test_cli_validate_and_synthesize_report(tmp_path, capsys):
    from icml26.cli import main

    out = tmp_path / "syn"
    assert main(["optminer", "synthesize", "--n", "8", "--out", str(out), "--seed", "4", "--no-progress"]) == 0
    report = json.loads((out / "validation.json").read_text())
    assert report["checked"] == 8 and report["differ"] == 0
    assert "| template | checked | differ |" in capsys.readouterr().out
    assert main(["optminer", "validate", str(out), "--limit", "3", "--json", str(tmp_path / "v.json")]) == 0
    assert json.loads((tmp_path / "v.json").read_text())["checked"] == 3
    assert main(["optminer", "validate", str(tmp_path)]) == 2
    assert "validate: DIR: expected a `synthesize --out` folder" in capsys.readouterr().err


@pytest.mark.slow
def test_500_seeded_instances_match_their_text():
    report = validate(rows(500, seed=0))
    assert report["checked"] == 500 and report["differ"] == 0, report["failures"][:5]
