"""Opt-Miner decontamination: three passes (13-grams, number-masked MinHash, sentence sets) of training items
against benchmark questions, and 13-gram overlap between benchmarks."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from icml26.agents.optminer.bench import bench_folder, discover, load_benchmark
from icml26.agents.optminer.decontaminate import (
    MASKED_THRESHOLD,
    SENTENCE_THRESHOLD,
    MaskedIndex,
    NgramIndex,
    SentenceIndex,
    benchmark_overlap,
    contaminated,
    ngrams,
    sentence_set,
    shingles,
)

Q1 = ("A bakery makes muffins and scones. Each muffin needs 2 cups of flour and each scone needs 3 cups; "
      "the bakery has 120 cups of flour and earns $3 per muffin and $4 per scone. How many of each should it bake "
      "to maximise profit?")
Q2 = ("A farmer plants wheat and corn on 50 acres. Wheat yields $300 per acre and corn $450 per acre, and corn "
      "needs twice the labour of wheat; 80 labour days are available. How should the land be split?")
OTHER = ("Alder Works makes chairs and desks from timber; quantities may be fractional. At Alder Works, each unit "
         "of chairs yields a profit of $40. Maximise the total profit of Alder Works.")


def write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_overlap_is_the_shared_share_of_the_shorter_text():
    index = NgramIndex([Q1, Q2])
    assert index.best(Q1) == (1.0, 0)  # verbatim
    assert index.best("Preamble of a training item. " + Q2 + " Write a PuLP model.")[0] == 1.0  # contains Q2
    assert index.best(OTHER) == (0.0, None)
    half = " ".join(Q1.split()[:25]) + " then something else entirely, with new numbers 1 2 3 4 5 6 7 8 9 10 11 12 13"
    assert 0.2 < index.best(half)[0] < 0.8
    assert len(ngrams("one two three")) == 1 and ngrams("") == set()
    with pytest.raises(ValueError, match="NgramIndex: n: expected a positive int"):
        NgramIndex([Q1], n=0)


def test_contaminated_training_items_and_cross_benchmark_overlap(tmp_path):
    bench = {"A": load_benchmark(write(tmp_path / "A.jsonl", [{"en_question": Q1, "en_answer": "160"},
                                                              {"en_question": Q2, "en_answer": "18000"}])),
             "B": load_benchmark(write(tmp_path / "B.jsonl", [{"en_question": Q1, "en_answer": "161.5"}]))}
    hits = contaminated([OTHER, "Solve this: " + Q1, Q2.upper()], bench)
    assert [(h.index, h.benchmark, h.overlap) for h in hits] == [(1, "A", 1.0), (2, "A", 1.0)]
    assert contaminated([OTHER], bench) == []
    rows = {(r["benchmark"], r["overlaps"]): r for r in benchmark_overlap(bench)}
    assert rows[("B", "A")]["overlapping"] == 1 and rows[("B", "A")]["different_answers"] == 1  # 161.5 vs 160
    assert ("A", "A") not in rows  # a file never overlaps itself through the same question
    with pytest.raises(ValueError, match="threshold: expected a number in"):
        contaminated([OTHER], bench, threshold=1.5)


def test_cli_decontaminate_reports_and_drops(tmp_path, capsys):
    from icml26.cli import main

    (tmp_path / "bench").mkdir()
    write(tmp_path / "bench" / "A.jsonl", [{"en_question": Q1, "en_answer": "160"}])
    write(tmp_path / "bench" / "B.jsonl", [{"en_question": Q1, "en_answer": "160.0"}])
    train = write(tmp_path / "train.jsonl", [{"en_question": OTHER, "en_answer": "1"},
                                             {"en_question": Q1 + " Thanks.", "en_answer": "160"}])
    assert main(["optminer", "decontaminate", str(train), str(tmp_path / "bench"), "--drop",
                 str(tmp_path / "kept.jsonl"), "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 training items copy a benchmark question" in out and "(by pass: ngram 1)" in out
    assert "A: 1 of 1 questions also in B, 0 with a different answer" in out
    kept = [json.loads(line) for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert [k["en_question"] for k in kept] == [OTHER]
    assert json.loads((tmp_path / "r.json").read_text())["contaminated"] == 1
    # a synthesize folder is a training set too; no synthetic text repeats these questions
    syn = tmp_path / "syn"
    assert main(["optminer", "synthesize", "--n", "3", "--out", str(syn), "--no-progress", "--no-validate"]) == 0
    capsys.readouterr()
    assert main(["optminer", "decontaminate", str(syn), str(tmp_path / "bench" / "A.jsonl")]) == 0
    assert "0 of 3 training items" in capsys.readouterr().out
    assert main(["optminer", "decontaminate", str(tmp_path / "nope"), str(tmp_path / "bench")]) == 2
    with pytest.raises(SystemExit) as info:
        main(["optminer", "decontaminate", str(train), str(tmp_path / "bench"), "--threshold", "1"])
    assert info.value.code == 2


def test_masked_and_sentence_passes_see_through_new_numbers_and_new_order():
    changed = re.sub(r"\d+", lambda m: str(int(m.group()) + 7), Q1)
    shuffled = " ".join(reversed(re.split(r"(?<=[.?;])\s+", Q1)))
    assert NgramIndex([Q1, Q2]).best(changed)[0] < 0.5  # the 13-gram pass misses both
    assert NgramIndex([Q1, Q2]).best(shuffled)[0] < 0.5
    assert shingles("It costs $3,000.50 per 12 units") == shingles("It costs $7 per 9 units")
    assert sentence_set("B is 4. A is 3.") == sentence_set("A is 9.  B is 1.") == {"a is 0": 3, "b is 0": 3}
    masked, sentences = MaskedIndex([Q2, Q1]), SentenceIndex([Q2, Q1])
    assert masked.best(changed)[1] == 1 and masked.best(changed)[0] > 0.9
    assert sentences.best(shuffled) == (1.0, 1) and sentences.best(changed) == (1.0, 1)
    assert masked.best(OTHER) == (0.0, None) and sentences.best(OTHER) == (0.0, None)
    assert masked.best(Q1, exclude=1)[1] != 1


def test_a_hit_names_the_pass_that_caught_it(tmp_path):
    bench = {"A": load_benchmark(write(tmp_path / "A.jsonl", [{"en_question": Q1, "en_answer": "160"},
                                                              {"en_question": Q2, "en_answer": "18000"}]))}
    changed = re.sub(r"\d+", lambda m: str(int(m.group()) * 3 + 1), Q2)
    shuffled = " ".join(reversed(re.split(r"(?<=[.?;])\s+", Q1)))
    hits = contaminated([OTHER, Q1, changed, shuffled], bench)
    assert [(h.index, h.method, h.question_id) for h in hits] == [
        (1, "ngram", bench["A"][0].id), (2, "masked", bench["A"][1].id), (3, "sentences", bench["A"][0].id)]
    assert contaminated([changed, shuffled], bench, passes=["ngram"]) == []
    assert [h.method for h in contaminated([changed], bench, passes=("sentences",))] == ["sentences"]
    for bad in ("masked", [], ["ngram", "bloom"]):
        with pytest.raises(ValueError, match="contaminated: passes: expected a non-empty subset"):
            contaminated([OTHER], bench, passes=bad)
    assert 0 < MASKED_THRESHOLD < 1 and 0 < SENTENCE_THRESHOLD < 1


# -- controls on the shipped benchmarks (thresholds were chosen on seed 1; these use seed 0) ----------------
SHARED_BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "optbench"
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@pytest.fixture(scope="module")
def shipped():
    folder = bench_folder() or SHARED_BENCH
    if not folder.is_dir():
        pytest.skip("set ICML26_OPTBENCH to a folder with the optimisation benchmarks (NL4OPT.jsonl, ...) to run this")
    return {name: load_benchmark(path) for name, path in discover(folder).items()}


def _controls(benchmarks: dict, seed: int, n: int) -> dict[str, list[str]]:
    """``n`` benchmark questions drawn with ``seed``, copied four ways: verbatim, inside a prompt, with every
    number replaced by another, with their sentences shuffled."""
    rng = np.random.default_rng(seed)
    questions = [i.question for items in benchmarks.values() for i in items]
    picked = [questions[k] for k in rng.choice(len(questions), size=n, replace=False)]

    def new_numbers(text):
        return _NUMBER.sub(lambda m: str(int(rng.integers(1, 1000))), text)

    def shuffled(text):
        parts = re.split(r"(?<=[.!?])\s+", text.strip())
        order = rng.permutation(len(parts))
        if len(parts) > 1 and (order == np.arange(len(parts))).all():
            order = np.roll(order, 1)
        return " ".join(parts[k] for k in order)

    return {"verbatim": picked, "prefixed": [f"Solve this problem. {q} Write a PuLP model." for q in picked],
            "numbers_changed": [new_numbers(q) for q in picked], "shuffled": [shuffled(q) for q in picked]}


def test_controls_on_the_shipped_benchmarks_are_caught(shipped):
    controls = _controls(shipped, seed=0, n=40)
    for name, texts in controls.items():
        assert all(a != b for a, b in zip(texts, controls["verbatim"])) or name == "verbatim"
        caught = len(contaminated(texts, shipped))
        assert caught >= 0.95 * len(texts), (name, caught)
    # the 13-gram pass alone misses most numbers-changed copies: what the new passes are for
    assert len(contaminated(controls["numbers_changed"], shipped, passes=["ngram"])) < 0.8 * 40


def test_no_synthesised_instance_overlaps_the_shipped_benchmarks(shipped):
    from icml26.agents.optminer.synth import draw_tree

    texts = []
    for i in range(300):  # synthesis before its solver checks: the text is what decontamination reads
        try:
            texts.append(draw_tree(np.random.default_rng([0, i, 0])).render_text())
        except ValueError:
            continue
    assert len(texts) >= 250
    assert contaminated(texts, shipped) == []
