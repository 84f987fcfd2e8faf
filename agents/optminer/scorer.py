"""Scoring a model's optimisation answer by running its solver code in the sandbox.

Reward (Reconstruction: the Opt-Miner paper's abstract names no reward; this follows SIRL's reward code,
Cardinal-Operations/SIRL, with a structured answer line of our choosing): the completion's last Python code
block runs in :class:`icml26.agents.sandbox.Sandbox` (time and memory limits, no network). The program is
asked to end with one line ``OBJECTIVE: <number>`` (or ``OBJECTIVE: INFEASIBLE`` / ``OBJECTIVE: UNBOUNDED``);
:func:`read_answer` takes the last such line. Only when a program prints none does it fall back to
:func:`read_free_text` (a boxed, labelled or sole amount, or a no-optimum word; ambiguity is ``unparsed``),
graded against a labelled set of answers in the styles models write (tests/data/optminer_fallback_labels.jsonl).
The program's stream is scanned line by line inside the sandbox (:data:`_RUNNER`), so the answer line is found
whatever the output's size, even when the stored output is cut to its head and tail.

Tolerance (:class:`Tolerance`, rule :data:`DEFAULT_RULE`): each reference falls in one branch
(:data:`BRANCHES`), whatever its JSON type (``1500``, ``1500.0``, ``"1500"``, ``"1500.00"`` are one reference):

- ``integer_exact``: an integer-valued reference is never widened: ``|pred - ref| < min(rtol * (|ref| + 1),
  INTEGER_ATOL)`` (SIRL's relative error, capped at 1e-3 so that a large integral optimum does not accept
  ``ref + 0.04``);
- ``zero_absolute``: a zero reference accepts ``|pred| < ZERO_ATOL`` (1e-6), so no ``x1.5`` error passes;
- ``rounded_half_ulp``: a reference printed with ``d > 0`` decimals and at least two significant digits, in a
  benchmark that rounds its references (:data:`BENCHMARK_ROUNDING`, one table with the reason per benchmark),
  accepts ``|pred - ref| <= 0.5 * 10**-d`` when that exceeds the relative slack (``"3.14"`` accepts 3.1436);
- ``relative``: otherwise SIRL's ``|pred - ref| / (|ref| + 1) < rtol`` with ``rtol = 1e-6`` (or ``<= atol``).

``rtol``/``atol`` given to :class:`Scorer` replace the rule by ``rel < rtol or abs <= atol`` alone. A
reference of ``None`` means the problem has no optimum ("No Best Solution"); then INFEASIBLE or UNBOUNDED is
correct. An optional format term adds ``format_weight`` when the completion has a code block (and, with
``require_think``, closed ``<think>`` tags). Code that loops, crashes or runs out of memory scores 0; the
scorer never raises for the model's failure. A sandbox that cannot run anything raises
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
DEFAULT_RULE = "rel-1e-6-int-exact-zero-abs-benchmark-rounding"
ZERO_ATOL = 1e-6     # a zero reference accepts |pred| < ZERO_ATOL
INTEGER_ATOL = 1e-3  # an integer-valued reference never accepts an error this large, whatever its size
BRANCHES = ("integer_exact", "zero_absolute", "rounded_half_ulp", "relative")
NUMBER = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_STRUCTURED = re.compile(rf"^[ \t]*OBJECTIVE:[ \t]*(?:(?P<value>{NUMBER})|(?P<word>(?i:INFEASIBLE|UNBOUNDED)))"
                         r"[ \t]*\.?[ \t]*$")


@dataclass(frozen=True)
class Rounding:
    """Whether a benchmark prints rounded references (so a reference with ``d`` decimals stands for an
    interval of half a unit in its last place), and the evidence for it."""

    rounds: bool
    reason: str


# Decided from the files SIRL republishes (Cardinal-Operations/SIRL, test_data/, commit 8e85194b).
BENCHMARK_ROUNDING = {
    "industryor": Rounding(True, "IndustryOR_fixedV2: references printed with 2-4 decimals that are rounded "
                                 "optima ('146.667', '1190.41', '0.5765') beside full-precision ones"),
    "mamo_complexlp": Rounding(True, "MAMO_ComplexLP_fixed: '172666.667', '66.366', '42142.86' are optima "
                                     "rounded to 2-3 decimals"),
    "mamo_easylp": Rounding(True, "MAMO_EasyLP_fixed: '566.67' and '7066.67' are thirds rounded to 2 decimals"),
    "nl4opt": Rounding(False, "NL4OPT: references are Python float reprs of solver optima ('20.8', "
                              "'327.6595744680851'), so one decimal is exact; the hand-corrected '2333.33' (7000/3) "
                              "is the one rounded record and gets only the relative tolerance"),
    "optmath": Rounding(False, "OptMATH-Bench (not shipped): integral optima stored as JSON floats ('1500.0'); "
                               "no evidence of rounding"),
    "optibench": Rounding(False, "OptiBench (not shipped): no evidence of rounding"),
}
NO_ROUNDING = Rounding(False, "not in BENCHMARK_ROUNDING: references are taken as exact")


def benchmark_rounding(benchmark: str | None) -> Rounding:
    """The :data:`BENCHMARK_ROUNDING` entry whose key starts ``benchmark`` (a file stem, case-insensitive,
    ``-`` read as ``_``: ``MAMO_EasyLP_fixed`` -> ``mamo_easylp``); :data:`NO_ROUNDING` for anything else."""
    if benchmark is None:
        return NO_ROUNDING
    if not isinstance(benchmark, str):
        raise InputTypeError("benchmark_rounding", "benchmark", "a benchmark name (str) or None",
                             described(type(benchmark).__name__))
    key = benchmark.strip().lower().replace("-", "_")
    return next((rule for name, rule in BENCHMARK_ROUNDING.items() if key.startswith(name)), NO_ROUNDING)


# -- the free-text reader: labels, amounts and what makes an answer ambiguous ---------------------------------
_W = r"(?![A-Za-z0-9])"
_QUALIFIER = r"(?:optimal|minimum|minimal|maximum|maximal|min|max|lowest|highest|least|greatest|best|total|overall)"
_NOUN = r"(?:cost|costs|profit|profits|revenue|income|earnings|expense|expenses|value|time|distance)"
_LABEL = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?:"
    rf"(?P<objective>(?:optimal[ _]+)?(?:objective|obj)(?P<more>(?:[ _]+function)?[ _]+value{_W}|[ _]+function{_W})?"
    rf"|optimal[ _]+value|optimum(?:[ _]+value)?)"
    rf"|(?P<answer>(?:final[ _]+)?answer)"
    rf"|(?P<quantity>{_QUALIFIER}(?:[ _]+(?:total|possible|overall|achievable))*[ _]+{_NOUN})"
    rf"|(?P<noun>cost|profit|revenue|income)){_W}")
_CONNECTOR = re.compile(r"(?i)(?:[ \t]*(?:\([^)\n]*\)|:=|=|:|\||~|≈|(?:is|are|was|were|will|would|be|becomes|equals?"
                        r"|comes|amounts|to|of|therefore|thus|hence|then|exactly|approximately|approx\.?|about"
                        r"|around|roughly|nearly)(?![A-Za-z])))*[ \t]*")
_AMOUNT = re.compile(
    r"(?P<sign>[-+])?[ \t]*(?:[$€£¥][ \t]*)?(?P<sign2>[-+])?(?P<number>\d+(?:,\d+)*(?:\.\d*)?|\.\d+)"
    r"(?P<exp>[eE][-+]?\d+)?(?:[ \t]*(?:x|×|\*|\\times)[ \t]*10[ \t]*\^[ \t]*\{?[ \t]*(?P<power>[-+]?\d+)[ \t]*\}?)?"
    r"(?:[ \t]*(?P<word>thousand|million|billion)(?![A-Za-z])|(?P<suffix>[kK]|M)(?![A-Za-z0-9]))?")
_GROUPED = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+")
_SCALE = {"k": 1e3, "K": 1e3, "M": 1e6, "thousand": 1e3, "million": 1e6, "billion": 1e9}
_ALTERNATIVE = re.compile(r"(?i)^[ \t]*(?:-|–|—|to|or|and|/|±|\+/-|\+-)[ \t]*[-+]?[$€£]?[ \t]*\d")
_ARITHMETIC = re.compile(r"^[ \t]*(?:[*×/+]|x(?![A-Za-z]))[ \t]*\(?[ \t]*\d")
_RESULT = re.compile(r"=[ \t]*(?=[-+$€£\d.])")
_BOXED = re.compile(r"\\boxed\{((?:[^{}]|\{[^{}]*\})*)\}")
_NEGATION = re.compile(r"(?i)(?:\bnot|n't|\bnever)[ \t]+(?:\w+[ \t]+)?$")
_MARKUP = (("\u2212", "-"), ("\\$", "$"), ("**", ""), ("__", ""), ("`", ""), ("\\,", ""), ("\\!", ""))
_NO_OPTIMUM = re.compile(r"(?i)\b(no best solution|infeasible|unbounded|no feasible solution|no optimal solution)\b")
_CANDIDATE = re.compile(r"(?i)objective|obj|optim|infeasible|unbounded|no best solution|no feasible|answer|boxed"
                        r"|cost|profit|revenue|income|earning|expense|value|time|distance|minim|maxim|total|overall")
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
    ``"structured"``, ``"boxed"``, ``"labelled"``, ``"status_word"``, ``"sole_amount"`` or ``None``."""

    kind: str | None
    value: float | None = None
    source: str | None = None
    line: str = ""

    @property
    def no_optimum(self) -> bool:
        return self.kind in ("infeasible", "unbounded", "no_optimum")


def read_answer(output) -> Answer:
    """The answer in a program's output (a string or an iterable of lines), scanning every line once.

    The last ``OBJECTIVE:`` line wins; without one, :func:`read_free_text` reads the rest.
    """
    lines = output.splitlines() if isinstance(output, str) else list(output)
    structured = None
    for line in lines:
        match = _STRUCTURED.match(line)
        if match:
            structured = match, line
    if structured is None:
        return read_free_text(lines)
    match, line = structured
    if match.group("word"):
        return Answer(match.group("word").lower(), None, "structured", line.strip())
    value = parse_number(match.group("value"))
    return Answer("number" if value is not None else None, value, "structured", line.strip())


def _amount(text: str, start: int) -> tuple[float | None, int] | None:
    """The amount at ``text[start:]``: ``None`` when there is none; ``(None, end)`` when it is ambiguous
    (invalid thousands grouping, a range or alternatives, an expression without its ``= result``)."""
    match = _AMOUNT.match(text, start)
    if match is None:
        return None
    if match.group("sign") and match.group("sign2") or not _GROUPED.fullmatch(match.group("number")):
        return None, match.end()
    rest = text[match.end():]
    if _ALTERNATIVE.match(rest):
        return None, match.end()
    if _ARITHMETIC.match(rest) or re.match(r"[ \t]+-[ \t]*\d", rest):
        results = [m.end() for m in _RESULT.finditer(text, match.end())]
        return _amount(text, results[-1]) if results else (None, match.end())
    value = float(match.group("number").replace(",", "") + (match.group("exp") or ""))
    value *= 10.0 ** int(match.group("power") or 0)
    value *= _SCALE.get(match.group("word") or match.group("suffix") or "", 1.0)
    if "-" in (match.group("sign"), match.group("sign2")):
        value = -value
    return (value if math.isfinite(value) else None), match.end()


def _clean(line: str) -> str:
    for old, new in _MARKUP:
        line = line.replace(old, new)
    return re.sub(r"\\text\{([^{}]*)\}", r"\1", line)


def read_free_text(output) -> Answer:
    """Reconstruction: the answer a careful grader reads in free text (a string or its lines), or
    ``Answer(None)`` when there is none or it is ambiguous. An amount keeps its sign, currency, valid 3-digit
    thousands groups, exponent, ``x 10^k`` and ``k``/``M``/``thousand``/``million``/``billion``; ``15%`` is 15.

    In order: the last ``\\boxed{...}`` that holds one amount (and nothing else numeric) or a no-optimum
    word; else the later of the last labelled amount (objective, optimal value, answer, minimum / maximum /
    total cost, profit, ...; a bare ``objective`` or ``answer`` needs ``:``, ``=`` or ``is``; a bare cost or
    profit needs ``of``) and the last un-negated no-optimum word; else an output that is one amount alone.
    An ambiguous last label (a range, alternatives, ``1,50``) makes the whole answer ``unparsed``.
    """
    lines = [_clean(line) for line in (output.splitlines() if isinstance(output, str) else output)]
    boxed = labelled = status = None
    for number, line in enumerate(lines):
        for box in _BOXED.finditer(line):
            inner = box.group(1).strip()
            word = _NO_OPTIMUM.search(inner)
            found = _amount(inner, 0) if not word else None
            if word and not re.search(r"\d", inner):
                boxed = Answer({"infeasible": "infeasible", "unbounded": "unbounded"}.get(word.group(1).lower(), "no_optimum"), None, "boxed", line.strip())
            elif found and found[0] is not None and not re.search(r"\d", inner[found[1]:]):
                boxed = Answer("number", found[0], "boxed", line.strip())
        for label in _LABEL.finditer(line):
            connector = _CONNECTOR.match(line, label.end())
            glue = connector.group(0).lower()
            bare = (label.group("objective") and label.group(0).lower().replace("_", " ") in ("objective", "obj")
                    or label.group("answer"))
            if bare and not re.search(r"[:=|]|\bis\b|\bequals?\b|≈|~", glue) or \
                    label.group("noun") and not re.search(r"\bof\b", glue):
                continue
            found = _amount(line, connector.end())
            if found is not None:
                labelled = (number, label.start()), found[0], line
        for hit in _NO_OPTIMUM.finditer(line):
            if not _NEGATION.search(line[:hit.start()]):
                status = (number, hit.start()), hit.group(1), line
    if boxed is not None:
        return boxed
    if labelled is not None and (status is None or labelled[0] >= status[0]):
        return Answer("number", labelled[1], "labelled", labelled[2].strip()) if labelled[1] is not None \
            else Answer(None, None, "labelled", labelled[2].strip())
    if status is not None:
        return Answer({"infeasible": "infeasible", "unbounded": "unbounded"}.get(status[1].lower(), "no_optimum"), None, "status_word", status[2].strip())
    text = [line.strip() for line in lines if line.strip()]
    if len(text) == 1:
        found = _amount(text[0], 0)
        if found and found[0] is not None and re.fullmatch(r"[ \t]*[.;!]*[ \t]*", text[0][found[1]:]):
            return Answer("number", found[0], "sole_amount", text[0])
    return Answer(None)


def parse_objective(output: str) -> float | None:
    """The objective value :func:`read_answer` finds in ``output`` (``None`` when it finds none)."""
    return read_answer(output).value


def relative_error(value: float, reference: float) -> float:
    """SIRL's relative error ``|value - reference| / (|reference| + 1)``."""
    return abs(value - reference) / (abs(reference) + 1.0)


@dataclass(frozen=True)
class Tolerance:
    """When a predicted objective counts as the reference: the branches of :data:`DEFAULT_RULE` (module
    docstring), or with ``printed_decimals=False`` the plain ``rel < rtol or abs <= atol``.

    Reconstruction: SIRL uses ``rtol=1e-6`` alone, which fails correct programs on references rounded to
    two decimals; the half-unit widening is applied only where :data:`BENCHMARK_ROUNDING` says the
    benchmark rounds, and never to integer-valued or zero references.
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
            "-int-exact-zero-abs-benchmark-rounding" if self.printed_decimals else "")

    def half_unit(self, raw) -> float:
        """Half a unit in the last printed decimal of ``raw``, the slack it earns in a benchmark that rounds:
        0 for an integer-valued or zero reference, one with a single significant digit (``"0.1"`` pins
        nothing within 50%), or with the rule off."""
        if not self.printed_decimals or raw is None or (value := parse_answer(raw)) is None:
            return 0.0
        digits = Decimal(str(raw).replace(",", "").strip()).as_tuple().digits  # parse_answer read it: valid
        if value == 0 or value.is_integer() or len("".join(map(str, digits)).lstrip("0")) < 2:
            return 0.0
        decimals = printed_decimals(raw)
        return 0.5 * 10.0 ** -decimals if decimals else 0.0

    def branch(self, reference: float, raw=None, *, rounds: bool = False) -> str:
        """Which of :data:`BRANCHES` decides for ``reference`` (``raw``: as printed; ``rounds``: whether its
        benchmark rounds, :func:`benchmark_rounding`)."""
        if not isinstance(rounds, bool):
            raise InputTypeError("Tolerance.branch", "rounds", "a bool", described(repr(rounds)))
        reference = parse_answer(reference)
        if reference is None:
            raise input_error("Tolerance.branch", "reference", "a finite number", described("no optimum (None)"))
        if not self.printed_decimals:
            return "relative"
        if reference == 0:
            return "zero_absolute"
        if reference.is_integer():
            return "integer_exact"
        if rounds and self.half_unit(reference if raw is None else raw) > self.rtol * (abs(reference) + 1):
            return "rounded_half_ulp"
        return "relative"

    def accepts(self, predicted: float, reference: float, raw=None, *, rounds: bool = False) -> bool:
        branch = self.branch(reference, raw, rounds=rounds)
        reference = float(parse_answer(reference))
        diff = abs(predicted - reference)
        if branch == "zero_absolute":
            return abs(predicted) < ZERO_ATOL
        if branch == "integer_exact":
            return diff < min(self.rtol * (abs(reference) + 1), INTEGER_ATOL)
        if branch == "rounded_half_ulp":
            return diff <= self.half_unit(reference if raw is None else raw) * (1 + 1e-9)
        return relative_error(predicted, reference) < self.rtol or diff <= self.atol

    def to_dict(self) -> dict:
        rule = (f"integer_exact: |pred-ref| < min(rtol*(|ref|+1), {INTEGER_ATOL:g}); zero_absolute: |pred| < "
                f"{ZERO_ATOL:g}; rounded_half_ulp (benchmarks that round): |pred-ref| <= 0.5e-d; relative: "
                if self.printed_decimals else "")
        return {"rule": self.name, "rtol": self.rtol, "atol": self.atol, "printed_decimals": self.printed_decimals,
                "zero_atol": ZERO_ATOL, "integer_atol": INTEGER_ATOL, "description": rule
                + "|pred-ref|/(|ref|+1) < rtol" + (" or |pred-ref| <= atol" if self.atol else "")}


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

    def judge(self, output, reference, raw=None, *, benchmark: str | None = None
              ) -> tuple[bool, str, float | None, float | None]:
        """Decide correctness from a program's output (a string or its lines):
        ``(correct, status, predicted, rel_error)``.

        ``reference``: a number, or None for "no optimum"; ``raw``: the reference as printed (default:
        ``reference`` itself); ``benchmark``: its benchmark's name, for :data:`BENCHMARK_ROUNDING`.
        """
        return self._judge(read_answer(output), reference, raw, benchmark)

    def _judge(self, answer: Answer, reference, raw, benchmark=None) -> tuple[bool, str, float | None, float | None]:
        if answer.kind is None:
            return False, "unparsed", None, None
        if reference is None:
            return answer.no_optimum, "correct" if answer.no_optimum else "wrong", answer.value, None
        if answer.value is None:
            return False, "wrong", None, None
        ok = self.tolerance.accepts(answer.value, reference, raw, rounds=benchmark_rounding(benchmark).rounds)
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
        if len([line for line in output.splitlines() if line.strip()]) == 1:  # a one-line output is never cut
            scanned = output.splitlines()
        return dataclasses.replace(result, output=output), read_answer(scanned)

    def score_code(self, code: str, reference, *, format_ok: bool = True, benchmark: str | None = None) -> Score:
        """Run ``code`` and score what it prints against ``reference`` (a number, a numeric string,
        or None / "No Best Solution"; a string's printed decimals are widened only where ``benchmark``
        rounds, :data:`BENCHMARK_ROUNDING`)."""
        benchmark_rounding(benchmark)  # a bad name fails before the program runs
        raw = reference if isinstance(reference, str) else None
        reference = reference if reference is None else parse_answer(reference)
        result, answer = self.run_program(code)
        bonus = self.format_weight if format_ok else 0.0
        failed = "timeout" if result.timed_out else "memory" if result.memory_exceeded else \
            "error" if result.returncode != 0 else None
        if failed:
            return Score(bonus, False, failed, None, reference, None, format_ok, result.output, result.duration_s)
        correct, status, predicted, err = self._judge(answer, reference, raw, benchmark)
        return Score(float(correct) + bonus, correct, status, predicted, reference, err, format_ok,
                     result.output, result.duration_s, answer.source)

    def score(self, completion: str, reference, *, benchmark: str | None = None) -> Score:
        """Score a model's completion: extract its code block, run it, compare the answer (``benchmark``:
        see :meth:`score_code`)."""
        if not isinstance(completion, str):
            raise InputTypeError("Scorer.score", "completion", "a string", described(type(completion).__name__))
        code = extract_code(completion)
        if code is None:
            ref = reference if reference is None else parse_answer(reference)
            return Score(0.0, False, "no_code", None, ref, None, False)
        return self.score_code(code, reference, format_ok=self.format_ok(completion), benchmark=benchmark)

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
