"""Scoring a model's optimisation answer by running its solver code in the sandbox.

Reward (Reconstruction: the Opt-Miner paper's abstract names no reward; this follows SIRL's reward code,
Cardinal-Operations/SIRL): the completion's last Python code block runs in
:class:`icml26.agents.sandbox.Sandbox` (time and memory limits, no network); the objective is
parsed from what it prints and is correct when ``|pred - ref| / (|ref| + 1) < rtol`` (SIRL's
relative error; ``rtol`` defaults to SIRL's 1e-6), or, when ``atol`` > 0, ``|pred - ref| <= atol``. A reference of ``None`` means the problem has
no optimum ("No Best Solution", infeasible or unbounded); then the program is correct when it
says so and prints no objective. An optional format term adds ``format_weight`` when the
completion has a code block (and, with ``require_think``, closed ``<think>`` tags). Code that
loops, crashes or runs out of memory scores 0; the scorer never raises for the model's failure.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from icml26.errors import input_error

DEFAULT_RTOL = 1e-6
NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_OBJECTIVE_LINE = re.compile(
    rf"(?i)(?:optimal|best|minimum|maximum|min|max|total)?[ _\w]*?(?:objective|obj|optimal value|optimum)"
    rf"[ _\w()]*?\s*(?:is|:|=)\s*\$?\s*({NUMBER})")
_NO_OPTIMUM = re.compile(r"(?i)\b(no best solution|infeasible|unbounded|no feasible|no optimal)\b")
_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)
_PYTHON_TAG = re.compile(r"<python>(.*?)</python>", re.S)


def parse_number(text: str) -> float | None:
    text = text.replace(",", "").strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_answer(raw) -> float | None:
    """A benchmark answer: a number, or ``None`` for "No Best Solution" / infeasible / unbounded."""
    if isinstance(raw, bool):
        raise input_error("parse_answer", "answer", "a number or 'No Best Solution'", raw)
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str):
        value = parse_number(raw)
        if value is not None:
            return value
        if _NO_OPTIMUM.search(raw):
            return None
    raise input_error("parse_answer", "answer", "a number or 'No Best Solution'", raw)


def extract_code(completion: str) -> str | None:
    """The last fenced Python block (or SIRL-style ``<python>`` block) of a completion."""
    blocks = _CODE_BLOCK.findall(completion) or _PYTHON_TAG.findall(completion)
    return blocks[-1].strip() if blocks else None


def parse_objective(output: str) -> float | None:
    """The objective a program printed: the last "objective ... : value" line, else the last number."""
    hits = _OBJECTIVE_LINE.findall(output)
    for hit in reversed(hits):
        value = parse_number(hit)
        if value is not None:
            return value
    for token in reversed(re.findall(NUMBER, output)):
        value = parse_number(token)
        if value is not None:
            return value
    return None


def relative_error(value: float, reference: float) -> float:
    return abs(value - reference) / (abs(reference) + 1.0)


@dataclass
class Score:
    reward: float
    correct: bool
    status: str                     # correct | wrong | no_code | no_number | timeout | memory | error
    predicted: float | None
    reference: float | None
    relative_error: float | None
    format_ok: bool
    output: str = ""
    duration_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


class Scorer:
    """Runs solver code in a sandbox and scores its objective against a reference.

    ``rtol``: relative tolerance (SIRL's formula); ``atol``: an absolute tolerance also accepted
    (0 = off; some papers use 1e-2). ``time_limit`` (s) and ``memory_limit_mb``
    bound each program. ``format_weight``: reward added for a well-formed completion.
    ``sandbox_kwargs`` go to :class:`~icml26.agents.sandbox.Sandbox` (e.g. ``allow_unisolated``).
    """

    def __init__(self, rtol: float = DEFAULT_RTOL, *, atol: float = 0.0, time_limit: float = 20.0,
                 memory_limit_mb: int = 2048, format_weight: float = 0.0, require_think: bool = False,
                 max_output_chars: int = 4000, **sandbox_kwargs):
        if not rtol > 0:
            raise input_error("Scorer", "rtol", "a number > 0", rtol)
        if not atol >= 0:
            raise input_error("Scorer", "atol", "a number >= 0", atol)
        self.atol = float(atol)
        if not format_weight >= 0:
            raise input_error("Scorer", "format_weight", "a number >= 0", format_weight)
        self.rtol, self.format_weight, self.require_think = float(rtol), float(format_weight), require_think
        from icml26.agents.sandbox import check_limits

        check_limits(memory_limit_mb=memory_limit_mb, function="Scorer")  # here, not at the first program
        self.time_limit = float(time_limit)
        self._sandbox_kwargs = dict(time_limit=time_limit, memory_limit_mb=memory_limit_mb,
                                    max_output_chars=max_output_chars, **sandbox_kwargs)
        self._sandbox = None

    @property
    def sandbox(self):
        if self._sandbox is None:
            from icml26.agents.sandbox import Sandbox

            self._sandbox = Sandbox(None, **self._sandbox_kwargs)
        return self._sandbox

    def close(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    def __enter__(self) -> Scorer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- scoring -----------------------------------------------------------------------------------
    def format_ok(self, completion: str) -> bool:
        ok = extract_code(completion) is not None
        if self.require_think:
            ok = ok and re.search(r"<think>.*?</think>", completion, re.S) is not None
        return ok

    def judge(self, output: str, reference: float | None) -> tuple[bool, str, float | None, float | None]:
        """Decide correctness from a program's output: ``(correct, status, predicted, rel_error)``."""
        predicted = parse_objective(output)
        if reference is None:
            says_none = _NO_OPTIMUM.search(output) is not None
            has_objective = _OBJECTIVE_LINE.search(output) is not None
            ok = says_none and not has_objective
            return ok, "correct" if ok else "wrong", predicted, None
        if predicted is None:
            return False, "no_number", None, None
        err = relative_error(predicted, reference)
        ok = err < self.rtol or abs(predicted - reference) <= self.atol
        return ok, "correct" if ok else "wrong", predicted, err

    def score_code(self, code: str, reference, *, format_ok: bool = True) -> Score:
        """Run ``code`` and score what it prints against ``reference`` (a number, a numeric string,
        or None / "No Best Solution")."""
        reference = reference if reference is None else parse_answer(reference)
        result = self.sandbox.run_python(code)
        try:
            self.sandbox.reset()  # files the program wrote must not leak into the next one
        except Exception:  # pragma: no cover - a program that broke the scratch copy: start afresh
            self.close()
        bonus = self.format_weight if format_ok else 0.0
        if result.timed_out:
            return Score(bonus, False, "timeout", None, reference, None, format_ok, result.output, result.duration_s)
        if result.memory_exceeded:
            return Score(bonus, False, "memory", None, reference, None, format_ok, result.output, result.duration_s)
        if result.returncode != 0:
            return Score(bonus, False, "error", None, reference, None, format_ok, result.output, result.duration_s)
        correct, status, predicted, err = self.judge(result.output, reference)
        return Score(float(correct) + bonus, correct, status, predicted, reference, err, format_ok,
                     result.output, result.duration_s)

    def score(self, completion: str, reference) -> Score:
        """Score a model's completion: extract its code block, run it, compare the objective."""
        if not isinstance(completion, str):
            raise TypeError(f"completion must be a string, got {type(completion).__name__}")
        code = extract_code(completion)
        reference = reference if reference is None else parse_answer(reference)
        if code is None:
            return Score(0.0, False, "no_code", None, reference, None, False)
        return self.score_code(code, reference, format_ok=self.format_ok(completion))

    def reward_function(self):
        """A TRL-style reward function ``f(completions, answer, **kw) -> list[float]``.

        ``completions`` are strings or chat messages (the last assistant message's content is scored);
        ``answer`` is the dataset column with the reference objectives.
        """
        def optimisation_reward(completions, answer, **kwargs) -> list[float]:
            rewards = []
            for completion, ref in zip(completions, answer):
                if isinstance(completion, list):
                    completion = next((m.get("content") or "" for m in reversed(completion)
                                       if m.get("role") == "assistant"), "")
                rewards.append(self.score(completion, ref).reward)
            return rewards

        return optimisation_reward
