"""SERA soft verification and filters: the closed forms of SERA's recall (arXiv 2601.20789), threshold semantics and filter boundaries."""

import random

import pytest

from icml26.agents.sera.verification import (
    FilterConfig,
    changed_lines,
    check_threshold,
    count_changed_lines,
    filter_trajectory,
    is_verified,
    patch_recall,
    token_counter,
    tool_response_tokens,
    truncate_messages,
    verify,
)


def make_patch(lines, path="pkg/mod.py"):
    """A git-style diff whose body lines are ``lines`` (each already signed), with every header kind."""
    body = "\n".join(lines)
    return (f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -1,3 +1,3 @@ def f():\n context line\n{body}\n")


# ------------------------------------------------------------------------------- 6.1 closed forms

def test_recall_closed_form_and_threshold():
    p1 = make_patch(["-a", "+b", "+c"])
    p2 = make_patch(["+b", "+c", "+d"])
    assert patch_recall(p1, p2) == pytest.approx(2 / 3)
    assert verify(p1, p2, 0.5) is True
    assert verify(p1, p2, 1.0) is False


def test_recall_is_over_p1_not_p2():
    small, large = make_patch(["+b"]), make_patch(["+b", "+c", "+d"])
    assert patch_recall(small, large) == 1.0  # a precision would give 1/3
    assert patch_recall(large, small) == pytest.approx(1 / 3)


def test_headers_and_blank_lines_are_ignored():
    p1 = make_patch(["+x = 1", "+", "-   ", "+\t"])
    assert changed_lines(p1) == ["+x = 1"]
    # header-looking lines in P2 never match P1's content lines
    p2 = "--- a/x\n+++ b/x\n@@ -1 +1 @@\ndiff --git a/x b/x\n+x = 1\n"
    assert patch_recall(p1, p2) == 1.0
    assert patch_recall(make_patch(["+x = 1"]), "--- x = 1\n+++ x = 1\n") == 0.0


def test_leading_whitespace_matters_and_signs_are_kept():
    assert patch_recall(make_patch(["+    return x"]), make_patch(["+return x"])) == 0.0
    assert patch_recall(make_patch(["-return x"]), make_patch(["+return x"])) == 0.0


def test_empty_p1_gives_none():
    assert patch_recall("", make_patch(["+a"])) is None
    assert patch_recall(None, make_patch(["+a"])) is None
    assert patch_recall(make_patch(["+", "-"]), make_patch(["+a"])) is None  # only blank changes
    assert verify("", make_patch(["+a"]), 0.0) is False


def test_duplicates_count_as_a_multiset():
    assert patch_recall(make_patch(["+x", "+x"]), make_patch(["+x"])) == 0.5
    assert patch_recall(make_patch(["+x"]), make_patch(["+x", "+x"])) == 1.0


def test_bad_patch_types_are_rejected():
    with pytest.raises(TypeError, match="unified diff"):
        patch_recall(["+a"], "")


# -------------------------------------------------------------------------- 6.2 threshold semantics

def test_threshold_zero_keeps_every_nonempty_p2():
    p1 = make_patch(["+a", "+b"])
    assert is_verified(patch_recall(p1, make_patch(["+zzz"])), 0.0, p2_nonempty=True)
    assert verify(p1, make_patch(["+zzz"]), 0.0) is True      # recall 0 but P2 changed something
    assert verify(p1, "", 0.0) is False                       # empty P2
    assert verify(p1, make_patch(["+a", "+b", "+c"]), 1.0) is True
    assert verify(p1, make_patch(["+a"]), 1.0) is False


def test_kept_count_is_monotone_in_threshold():
    rng = random.Random(0)
    pool = [f"{s}line{i}" for i in range(6) for s in "+-"]
    pairs = [(make_patch(rng.sample(pool, rng.randint(1, 5))), make_patch(rng.sample(pool, rng.randint(0, 6))))
             for _ in range(200)]
    grid = [i / 20 for i in range(21)]
    kept = [sum(verify(p1, p2, t) for p1, p2 in pairs) for t in grid]
    assert all(a >= b for a, b in zip(kept, kept[1:]))
    assert kept[0] > kept[-1] > 0  # the sample spans the range


@pytest.mark.parametrize("bad", [1.5, -0.1, True, "0.5", None])
def test_threshold_validation(bad):
    with pytest.raises(ValueError, match="check_threshold: threshold: expected a number in"):
        check_threshold(bad)


# ----------------------------------------------------------------------------------------- filters

def trajectory(tool_words=(5,), submitted=True, submit_words=3):
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "fix it"}]
    for i, n in enumerate(tool_words):
        messages.append({"role": "assistant", "content": "look",
                         "tool_calls": [{"id": f"c{i}", "type": "function",
                                         "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": " ".join(["w"] * n)})
    if submitted:
        messages.append({"role": "assistant", "content": "done",
                         "tool_calls": [{"id": "s", "type": "function", "function": {"name": "submit", "arguments": "{}"}}]})
        messages.append({"role": "tool", "tool_call_id": "s", "content": " ".join(["thanks"] * submit_words)})
    return messages


def test_changed_lines_filter_boundary():
    p40 = make_patch([f"+x{i}" for i in range(39)] + ["+"])  # a blank added line counts for the filter
    p41 = make_patch([f"+x{i}" for i in range(40)] + ["-"])
    assert count_changed_lines(p40) == 40 and count_changed_lines(p41) == 41
    assert filter_trajectory(trajectory(), p40, True).keep
    result = filter_trajectory(trajectory(), p41, True)
    assert not result.keep and result.reasons == ["changed_lines"] and result.n_changed_lines == 41


def test_tool_output_filter_boundary_excludes_the_submit_review():
    keep = filter_trajectory(trajectory([600, 600], submit_words=50_000), make_patch(["+a"]), True)
    assert keep.keep and keep.avg_tool_tokens == 600
    drop = filter_trajectory(trajectory([600, 602]), make_patch(["+a"]), True)
    assert drop.avg_tool_tokens == 601 and drop.reasons == ["tool_output_length"]


def test_enforce_submit():
    messages = trajectory(submitted=False)
    assert filter_trajectory(messages, make_patch(["+a"]), False).reasons == ["not_submitted"]
    assert filter_trajectory(messages, make_patch(["+a"]), False, config=FilterConfig(enforce_submit=False)).keep


def test_token_budget_truncates_at_an_assistant_message():
    messages = trajectory([10, 10, 10])
    full = filter_trajectory(messages, make_patch(["+a"]), True, config=FilterConfig(max_tokens=None))
    assert full.truncation_ratio == 1.0 and full.messages == messages
    budget = full.n_tokens - 5
    cut = filter_trajectory(messages, make_patch(["+a"]), True, config=FilterConfig(max_tokens=budget))
    assert cut.keep and cut.messages[-1]["role"] == "assistant" and len(cut.messages) < len(messages)
    kept, kept_tokens, total = truncate_messages(messages, budget)
    assert cut.messages == kept and total == full.n_tokens
    assert cut.truncation_ratio == pytest.approx(kept_tokens / total) and 0 < cut.truncation_ratio < 1
    dropped = filter_trajectory(messages, make_patch(["+a"]), True, config=FilterConfig(max_tokens=budget,
                                                                                       truncate=False))
    assert dropped.reasons == ["token_length"]
    too_small = filter_trajectory(messages, make_patch(["+a"]), True, config=FilterConfig(max_tokens=2))
    assert too_small.reasons == ["token_length"]


def test_token_counters():
    class Tok:
        def encode(self, text, add_special_tokens=False):
            return list(text)

    assert token_counter(None)("a b  c") == 3
    assert token_counter(Tok())("abc") == 3
    assert token_counter(len)("abcd") == 4
    with pytest.raises(TypeError, match="token_counter: tokenizer: expected None, a path"):
        token_counter(3)
    with pytest.raises(ValueError, match="FilterConfig: max_changed_lines: expected an int >= 0, got -1"):
        FilterConfig(max_changed_lines=-1)
    with pytest.raises(ValueError, match="max_avg_tool_tokens: expected a non-negative finite number, got nan"):
        FilterConfig(max_avg_tool_tokens=float("nan"))  # used to be accepted, and then filtered nothing


def test_the_submit_review_observation_is_not_counted_even_without_its_call():
    from icml26.agents.tools import review_message

    messages = trajectory([600, 600], submitted=False)
    # a review answering a call the filter cannot match to `submit` (e.g. an id that was rewritten)
    messages.append({"role": "tool", "tool_call_id": "unmatched", "content": review_message("+x\n" * 5000)})
    assert tool_response_tokens(messages) == [600, 600]
    assert filter_trajectory(messages, make_patch(["+a"]), True).keep
    # an ordinary long tool response in the same place counts
    messages[-1] = {"role": "tool", "tool_call_id": "unmatched", "content": "w " * 5000}
    result = filter_trajectory(messages, make_patch(["+a"]), True)
    assert tool_response_tokens(messages)[-1] == 5000 and result.reasons == ["tool_output_length"]
