"""Opt-Miner decontamination: 13-gram overlap of training items with benchmark questions, and between benchmarks."""

import json

import pytest

from icml26.agents.optminer.bench import load_benchmark
from icml26.agents.optminer.decontaminate import NgramIndex, benchmark_overlap, contaminated, ngrams

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
    assert "1 of 2 training items overlap" in out and "A: 1 of 1 questions also in B, 0 with a different answer" in out
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
