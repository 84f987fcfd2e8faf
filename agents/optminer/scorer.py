"""Scoring a model's optimisation answer by running its solver code in the sandbox.

Reward (Reconstruction: the Opt-Miner paper's abstract names no reward; this follows SIRL's reward code,
Cardinal-Operations/SIRL, with a structured answer line of our choosing): the completion's last
Python code block runs in :class:`icml26.agents.sandbox.Sandbox` (time and memory limits, no
network). The program is asked to end with one line ``OBJECTIVE: <number>`` (or
``OBJECTIVE: INFEASIBLE`` / ``OBJECTIVE: UNBOUNDED``); :func:`read_answer` takes the last such line.
Only when a program prints none does it fall back, in this order of position (the later wins), to
a word-bounded objective label (``Objective value: 12``, ``optimal objective = 12``; never
``object count = 3``) or a word-bounded no-optimum word (``Infeasible``, ``No Best Solution``). A
bare number is never taken: such output is ``unparsed``. The program's stream is scanned line by
line inside the sandbox (:data:`_RUNNER`), so the answer line is found whatever the output's size,
even when the stored output is cut to its head and tail.

Tolerance (:class:`Tolerance`): the default rule ``rel-1e-6-or-printed-decimals`` accepts a relative
error ``|pred - ref| / (|ref| + 1) < 1e-6`` (SIRL's) or, for a reference printed with ``d > 0``
decimals, ``|pred - ref| <= 0.5 * 10**-d`` (half a unit of its last printed decimal: ``3.14``
accepts 3.1436); a reference printed as an integer is never widened. ``rtol``/``atol`` given
explicitly replace the rule with ``rel < rtol or abs <= atol``. A reference of ``None`` means the
problem has no optimum ("No Best Solution"); then INFEASIBLE or UNBOUNDED is correct. An optional
format term adds ``format_weight`` when the completion has a code block (and, with
``require_think``, closed ``<think>`` tags). Code that loops, crashes or runs out of memory scores 0;
the scorer never raises for the model's failure. A sandbox that cannot run anything raises
:class:`~icml26.agents.sandbox.SandboxError` (an infrastructure failure, not the model's).
"""

from __future__ import annotations

import dataclasses
import math
import re
import secrets
from dataclasses import asdict, dataclass
from decimal import Decimal, InvalidOperation

from icml26.errors import InputTypeError, described, input_error
from icml26.validation import check_finite, check_int

DEFAULT_RTOL = 1e-6
DEFAULT_RULE = "rel-1e-6-or-printed-decimals"
NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_STRUCTURED = re.compile(rf"^[ \t]*OBJECTIVE:[ \t]*(?:(?P<value>{NUMBER})|(?P<word>(?i:INFEASIBLE|UNBOUNDED)))"
                         r"[ \t]*\.?[ \t]*$")
_LABELLED = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?:(?:optimal[ _\t]+)?(?:objective|obj)(?:[ _\t]+function)?(?:[ _\t]+value)?"
    r"|optimal[ _\t]+value|optimum(?:[ _\t]+value)?)(?![A-Za-z0-9])"
    rf"[ \t]*(?:\([^)\n]*\))?[ \t]*(?:is|:|=)[ \t]*\$?[ \t]*(?P<value>{NUMBER})(?![\w])")
_NO_OPTIMUM = re.compile(r"(?i)\b(no best solution|infeasible|unbounded|no feasible solution|no optimal solution)\b")
_CANDIDATE = re.compile(r"(?i)objective|obj|optim|infeasible|unbounded|no best solution|no feasible")
_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)
_PYTHON_TAG = re.compile(r"<python>(.*?)</python>", re.S)
_SCAN_KEEP = 32  # fallback candidate lines the in-sandbox scan keeps (the structured line is kept on its own)

# Runs the model's program as a child and copies its output through, line by line, while keeping
# the last structured answer line and the last candidate lines for fallbacks; prints them between
# two nonce lines at the end. Standard library only: it runs in the sandbox's Python.
_RUNNER = r'''
import collections, os, re, subprocess, sys, tempfile
structured, candidate = re.compile(STRUCTURED), re.compile(CANDIDATE, re.I)
fd, path = tempfile.mkstemp(suffix=".py", dir=os.getcwd())
with os.fdopen(fd, "w", encoding="utf-8") as handle:
    handle.write(CODE)
env = dict(os.environ, PYTHONUNBUFFERED="1")
proc = subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
last, kept, number = None, collections.deque(maxlen=KEEP), 0
out = sys.stdout.buffer
for raw in proc.stdout:
    out.write(raw)
    number += 1
    line = raw[:2000].decode("utf-8", "replace").rstrip("\r\n")
    if structured.match(line):
        last = (number, line)
    elif candidate.search(line):
        kept.append((number, line))
code = proc.wait()
os.unlink(path)
lines = sorted(list(kept) + ([last] if last else []))
out.write(("\n" + NONCE + "\n" + "\n".join(text for _, text in lines) + "\n" + NONCE + "\n").encode())
out.flush()
sys.exit(code if code >= 0 else 128 - code)
'''


def parse_number(text: str) -> float | None:
    text = text.replace(",", "").strip()
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse_answer(raw) -> float | None:
    """A benchmark answer: a finite number, or ``None`` for "No Best Solution" / infeasible / unbounded.

    NaN and infinite values are refused (``InputError``): a benchmark holding one is broken.
    """
    if isinstance(raw, bool):
        raise input_error("parse_answer", "answer", "a finite number or 'No Best Solution'", raw)
    if isinstance(raw, (int, float)):
        if not math.isfinite(raw):
            raise input_error("parse_answer", "answer", "a finite number or 'No Best Solution'", raw)
        return float(raw)
    if isinstance(raw, str):
        value = parse_number(raw)
        if value is not None:
            return value
        if _NO_OPTIMUM.search(raw):
            return None
    raise input_error("parse_answer", "answer", "a finite number or 'No Best Solution'", raw)


def printed_decimals(raw) -> int:
    """How many decimals a reference is printed with (``"3.140"`` -> 3, ``"57.0"`` -> 1, ``"12"`` -> 0,
    ``"1.5e3"`` -> 0).

    A string counts as printed (trailing zeros included: the benchmark chose to print them). A float
    has no printed form: it counts as Python's shortest ``repr``, except that an integral float
    (``12.0``) counts as an integer; ints, and strings that are not numbers, count 0.
    """
    if isinstance(raw, bool) or raw is None or (isinstance(raw, float) and raw.is_integer()):
        return 0
    text = repr(raw) if isinstance(raw, float) else str(raw)
    try:
        exponent = Decimal(text.replace(",", "").strip()).as_tuple().exponent
    except InvalidOperation:
        return 0
    return max(0, -exponent) if isinstance(exponent, int) else 0


def extract_code(completion: str) -> str | None:
    """The last fenced Python block (or SIRL-style ``<python>`` block) of a completion."""
    blocks = _CODE_BLOCK.findall(completion) or _PYTHON_TAG.findall(completion)
    return blocks[-1].strip() if blocks else None


@dataclass(frozen=True)
class Answer:
    """What a program's output answers: ``kind`` is ``"number"``, ``"infeasible"``, ``"unbounded"``,
    ``"no_optimum"`` (a fallback word that does not say which) or ``None`` (unparsed); ``source`` is
    ``"structured"``, ``"labelled"``, ``"status_word"`` or ``None``."""

    kind: str | None
    value: float | None = None
    source: str | None = None
    line: str = ""

    @property
    def no_optimum(self) -> bool:
        return self.kind in ("infeasible", "unbounded", "no_optimum")


def read_answer(output) -> Answer:
    """The answer in a program's output (a string or an iterable of lines), scanning every line once.

    The last ``OBJECTIVE:`` line wins; without one, the later of the last labelled objective and the
    last no-optimum word; otherwise ``Answer(None)``.
    """
    lines = output.splitlines() if isinstance(output, str) else output
    structured = labelled = status = None
    for number, line in enumerate(lines):
        match = _STRUCTURED.match(line)
        if match:
            structured = match, line
            continue
        for hit in _LABELLED.finditer(line):
            labelled = number, hit.group("value"), line
        for hit in _NO_OPTIMUM.finditer(line):
            status = number, hit.group(1).lower(), line
    if structured is not None:
        match, line = structured
        if match.group("word"):
            return Answer(match.group("word").lower(), None, "structured", line.strip())
        value = parse_number(match.group("value"))
        return Answer("number" if value is not None else None, value, "structured", line.strip())
    if labelled is not None and (status is None or labelled[0] >= status[0]):
        value = parse_number(labelled[1])
        if value is not None:
            return Answer("number", value, "labelled", labelled[2].strip())
    if status is not None:
        kind = status[1] if status[1] in ("infeasible", "unbounded") else "no_optimum"
        return Answer(kind, None, "status_word", status[2].strip())
    return Answer(None)


def parse_objective(output: str) -> float | None:
    """The objective value :func:`read_answer` finds in ``output`` (``None`` when it finds none)."""
    return read_answer(output).value


def relative_error(value: float, reference: float) -> float:
    """SIRL's relative error ``|value - reference| / (|reference| + 1)``."""
    return abs(value - reference) / (abs(reference) + 1.0)


@dataclass(frozen=True)
class Tolerance:
    """When a predicted objective counts as the reference.

    ``printed_decimals=True`` (the default rule, :data:`DEFAULT_RULE`) also accepts anything within
    half a unit of the reference's last printed decimal. Reconstruction: SIRL uses ``rtol=1e-6``
    alone, which fails correct programs on references rounded to two decimals.
    """

    rtol: float = DEFAULT_RTOL
    atol: float = 0.0
    printed_decimals: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.rtol, bool) or not isinstance(self.rtol, (int, float)) or not 0 < self.rtol < math.inf:
            raise input_error("Tolerance", "rtol", "a number > 0", self.rtol)
        if isinstance(self.atol, bool) or not isinstance(self.atol, (int, float)) or not 0 <= self.atol < math.inf:
            raise input_error("Tolerance", "atol", "a number >= 0", self.atol)
        if not isinstance(self.printed_decimals, bool):
            raise InputTypeError("Tolerance", "printed_decimals", "a bool", described(repr(self.printed_decimals)))

    @property
    def name(self) -> str:
        if self.printed_decimals and self.rtol == DEFAULT_RTOL and self.atol == 0:
            return DEFAULT_RULE
        return f"rel-{self.rtol:g}" + (f"-or-abs-{self.atol:g}" if self.atol else "") + (
            "-or-printed-decimals" if self.printed_decimals else "")

    def half_unit(self, raw) -> float:
        """The absolute slack the printed reference ``raw`` earns (0 for integers or with the rule off)."""
        decimals = printed_decimals(raw) if self.printed_decimals else 0
        return 0.5 * 10.0 ** -decimals if decimals else 0.0

    def accepts(self, predicted: float, reference: float, raw=None) -> bool:
        diff = abs(predicted - reference)
        if relative_error(predicted, reference) < self.rtol or diff <= self.atol:
            return True
        half = self.half_unit(reference if raw is None else raw)
        return half > 0 and diff <= half * (1 + 1e-9)

    def to_dict(self) -> dict:
        return {"rule": self.name, "rtol": self.rtol, "atol": self.atol, "printed_decimals": self.printed_decimals,
                "description": ("relative error |pred-ref|/(|ref|+1) < rtol"
                                + (", or |pred-ref| <= atol" if self.atol else "")
                                + (", or, for a reference printed with d > 0 decimals, |pred-ref| <= 0.5e-d"
                                   if self.printed_decimals else ""))}


STATUSES = ("correct", "wrong", "unparsed", "no_code", "timeout", "memory", "error", "infra_error")


@dataclass
class Score:
    reward: float
    correct: bool
    status: str                     # one of STATUSES
    predicted: float | None
    reference: float | None
    relative_error: float | None
    format_ok: bool
    output: str = ""
    duration_s: float = 0.0
    answer_source: str | None = None  # structured | labelled | status_word | None

    def to_dict(self) -> dict:
        return asdict(self)


def _tolerance(rtol, atol, tolerance) -> Tolerance:
    if tolerance is not None:
        if rtol is not None or atol is not None:
            raise input_error("Scorer", "tolerance", "either tolerance= or rtol=/atol=, not both", tolerance)
        if not isinstance(tolerance, Tolerance):
            raise TypeError(f"Scorer: tolerance: expected a Tolerance, got {type(tolerance).__name__}")
        return tolerance
    if rtol is None and atol is None:
        return Tolerance()
    return Tolerance(DEFAULT_RTOL if rtol is None else rtol, 0.0 if atol is None else atol, printed_decimals=False)


class Scorer:
    """Runs solver code in a sandbox and scores its answer against a reference.

    Tolerance: the default rule (:data:`DEFAULT_RULE`) unless ``rtol`` and/or ``atol`` are given
    (then ``rel < rtol or abs <= atol``, rtol defaulting to 1e-6, atol to 0) or a
    :class:`Tolerance`. ``time_limit`` (s) and ``memory_limit_mb`` bound each program;
    ``format_weight``: reward added for a well-formed completion. ``sandbox_kwargs`` go to
    :class:`~icml26.agents.sandbox.Sandbox` (e.g. ``allow_unisolated``).
    """

    def __init__(self, rtol: float | None = None, *, atol: float | None = None, tolerance: Tolerance | None = None,
                 time_limit: float = 20.0, memory_limit_mb: int = 2048, format_weight: float = 0.0,
                 require_think: bool = False, max_output_chars: int = 4000, **sandbox_kwargs):
        if rtol is not None and (isinstance(rtol, bool) or not (isinstance(rtol, (int, float)) and rtol > 0)):
            raise input_error("Scorer", "rtol", "a number > 0", rtol)
        if atol is not None and (isinstance(atol, bool) or not (isinstance(atol, (int, float)) and atol >= 0)):
            raise input_error("Scorer", "atol", "a number >= 0", atol)
        self.tolerance = _tolerance(rtol, atol, tolerance)
        format_weight = check_finite("Scorer", "format_weight", format_weight, non_negative=True)
        time_limit = check_finite("Scorer", "time_limit", time_limit, positive=True)
        max_output_chars = check_int("Scorer", "max_output_chars", max_output_chars, low=1)
        if not isinstance(require_think, bool):
            raise InputTypeError("Scorer", "require_think", "a bool", described(repr(require_think)))
        self.format_weight, self.require_think = float(format_weight), require_think
        from icml26.agents.sandbox import check_limits

        check_limits(memory_limit_mb=memory_limit_mb, function="Scorer")  # here, not at the first program
        self.time_limit = float(time_limit)
        self._sandbox_kwargs = dict(time_limit=time_limit, memory_limit_mb=memory_limit_mb,
                                    max_output_chars=max_output_chars, **sandbox_kwargs)
        self._sandbox = None

    @property
    def rtol(self) -> float:
        return self.tolerance.rtol

    @property
    def atol(self) -> float:
        return self.tolerance.atol

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

    def judge(self, output, reference, raw=None) -> tuple[bool, str, float | None, float | None]:
        """Decide correctness from a program's output (a string or its lines):
        ``(correct, status, predicted, rel_error)``.

        ``reference``: a number, or None for "no optimum"; ``raw``: the reference as printed (for the
        printed-decimals rule; default: ``reference`` itself).
        """
        return self._judge(read_answer(output), reference, raw)

    def _judge(self, answer: Answer, reference, raw) -> tuple[bool, str, float | None, float | None]:
        if answer.kind is None:
            return False, "unparsed", None, None
        if reference is None:
            return answer.no_optimum, "correct" if answer.no_optimum else "wrong", answer.value, None
        if answer.value is None:
            return False, "wrong", None, None
        ok = self.tolerance.accepts(answer.value, reference, raw)
        return ok, "correct" if ok else "wrong", answer.value, relative_error(answer.value, reference)

    def run_program(self, code: str):
        """Run ``code`` in the sandbox; ``(exec_result, answer)`` with the answer scanned from the whole stream."""
        nonce = f"@@icml26-scan-{secrets.token_hex(8)}@@"
        runner = (_RUNNER.replace("STRUCTURED", repr(_STRUCTURED.pattern), 1)
                  .replace("CANDIDATE", repr(_CANDIDATE.pattern.removeprefix("(?i)")), 1)
                  .replace("KEEP", str(_SCAN_KEEP), 1).replace("NONCE", repr(nonce)).replace("CODE", repr(code), 1))
        result = self.sandbox.run_python(runner)
        try:
            self.sandbox.reset()  # files the program wrote must not leak into the next one
        except Exception:  # pragma: no cover - a program that broke the scratch copy: start afresh
            self.close()
        output = result.output
        end = output.rfind(nonce)
        begin = output.rfind(nonce, 0, end) if end >= 0 else -1
        if begin >= 0:  # the scan's report: what the program printed that could be an answer, in order
            scanned = output[begin + len(nonce):end].strip("\n").splitlines()
            output = (output[:begin].rstrip("\n") + output[end + len(nonce):].rstrip("\n")).rstrip()
        else:  # killed before the report: scan what the sandbox kept
            scanned = output.splitlines()
        return dataclasses.replace(result, output=output), read_answer(scanned)

    def score_code(self, code: str, reference, *, format_ok: bool = True) -> Score:
        """Run ``code`` and score what it prints against ``reference`` (a number, a numeric string,
        or None / "No Best Solution"; a string's printed decimals feed the default tolerance rule)."""
        raw = reference if isinstance(reference, str) else None
        reference = reference if reference is None else parse_answer(reference)
        result, answer = self.run_program(code)
        bonus = self.format_weight if format_ok else 0.0
        failed = "timeout" if result.timed_out else "memory" if result.memory_exceeded else \
            "error" if result.returncode != 0 else None
        if failed:
            return Score(bonus, False, failed, None, reference, None, format_ok, result.output, result.duration_s)
        correct, status, predicted, err = self._judge(answer, reference, raw)
        return Score(float(correct) + bonus, correct, status, predicted, reference, err, format_ok,
                     result.output, result.duration_s, answer.source)

    def score(self, completion: str, reference) -> Score:
        """Score a model's completion: extract its code block, run it, compare the answer."""
        if not isinstance(completion, str):
            raise InputTypeError("Scorer.score", "completion", "a string", described(type(completion).__name__))
        code = extract_code(completion)
        if code is None:
            ref = reference if reference is None else parse_answer(reference)
            return Score(0.0, False, "no_code", None, ref, None, False)
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
