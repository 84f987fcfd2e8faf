"""Decontamination: 13-gram overlap between training items and benchmark questions, and between benchmarks.

A training problem that repeats a benchmark question inflates that benchmark's score; a question
that two benchmark files share, with different reference answers, makes one of them unanswerable.
Overlap follows the n-gram rule of GPT-3's decontamination (Brown et al. 2020, arXiv 2005.14165,
appendix C; 13-grams of lower-cased words): ``overlap(a, b)`` is the share of the shorter text's
13-grams that the other text also has (1.0 for a verbatim copy or a containment; a text under 13
words counts as one n-gram of all its words). Reconstruction: the Opt-Miner paper says nothing about
decontamination; the share-of-the-shorter-text score and the default threshold (0.5) are ours.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from icml26.errors import InputTypeError, described, input_error

NGRAM = 13
DEFAULT_THRESHOLD = 0.5
_WORD = re.compile(r"\w+")


def ngrams(text: str, n: int = NGRAM) -> set[int]:
    """The hashed ``n``-grams of ``text``'s lower-cased words (one gram of every word when there are fewer)."""
    words = _WORD.findall(text.lower())
    if not words:
        return set()
    if len(words) < n:
        return {hash(tuple(words))}
    return {hash(tuple(words[i:i + n])) for i in range(len(words) - n + 1)}


class NgramIndex:
    """The 13-grams of a list of texts, to find the text that overlaps a query most."""

    def __init__(self, texts: Sequence[str], n: int = NGRAM):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise input_error("NgramIndex", "n", "a positive int", n)
        self.n = n
        self.grams = [ngrams(t, n) for t in texts]
        self.index: dict[int, list[int]] = defaultdict(list)
        for j, grams in enumerate(self.grams):
            for g in grams:
                self.index[g].append(j)

    def best(self, text: str, *, exclude: int | None = None) -> tuple[float, int | None]:
        """``(overlap, j)`` of the indexed text ``j`` that overlaps ``text`` most (``(0.0, None)`` when none does)."""
        grams = ngrams(text, self.n)
        shared = Counter(j for g in grams for j in self.index.get(g, ()) if j != exclude)
        best, where = 0.0, None
        for j, count in shared.items():
            score = count / min(len(grams), len(self.grams[j]))
            if score > best:
                best, where = score, j
        return best, where


@dataclass
class Hit:
    index: int          # the training item's position
    overlap: float
    benchmark: str
    question_id: str


def _check_threshold(threshold) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold < 1:
        raise input_error("decontaminate", "threshold", "a number in [0, 1)", threshold)
    return float(threshold)


def contaminated(train: Sequence[str], benchmarks: dict, threshold: float = DEFAULT_THRESHOLD) -> list[Hit]:
    """Training texts whose overlap with some question of ``benchmarks`` (name -> list of
    :class:`~.bench.BenchItem`) exceeds ``threshold``, each with its most-overlapping question."""
    threshold = _check_threshold(threshold)
    if isinstance(train, (str, bytes)) or not all(isinstance(t, str) for t in train):
        raise InputTypeError("contaminated", "train", "a sequence of training texts (strings)",
                             described(f"a {type(train).__name__}"))
    if not hasattr(benchmarks, "items"):
        raise InputTypeError("contaminated", "benchmarks", "a dict name -> list of BenchItem",
                             described(type(benchmarks).__name__))
    hits = []
    for name, items in benchmarks.items():
        index = NgramIndex([i.question for i in items])
        for k, text in enumerate(train):
            score, j = index.best(text)
            if j is not None and score > threshold:
                hits.append(Hit(k, score, name, items[j].id))
    best: dict[int, Hit] = {}
    for hit in hits:  # one line per training item: its worst benchmark
        if hit.index not in best or hit.overlap > best[hit.index].overlap:
            best[hit.index] = hit
    return [best[k] for k in sorted(best)]


def same_answer(a, b, tolerance=None) -> bool:
    """Whether two benchmark items' references agree (both without optimum, or numbers the tolerance accepts)."""
    from .scorer import Tolerance

    if a.answer is None or b.answer is None:
        return a.answer is None and b.answer is None
    rule = tolerance or Tolerance()
    return rule.accepts(a.answer, b.answer, b.raw_answer) or rule.accepts(b.answer, a.answer, a.raw_answer)


def benchmark_overlap(benchmarks: dict, threshold: float = DEFAULT_THRESHOLD) -> list[dict]:
    """For every ordered pair of benchmark files (and each file with itself): how many questions of the
    first overlap a question of the second above ``threshold``, and how many of those carry a
    different reference answer."""
    threshold = _check_threshold(threshold)
    rows = []
    names = list(benchmarks)
    indexes = {n: NgramIndex([i.question for i in benchmarks[n]]) for n in names}
    for a in names:
        for b in names:
            overlapping = differ = 0
            for k, item in enumerate(benchmarks[a]):
                score, j = indexes[b].best(item.question, exclude=k if a == b else None)
                if j is not None and score > threshold:
                    overlapping += 1
                    differ += not same_answer(item, benchmarks[b][j])
            if overlapping:
                rows.append({"benchmark": a, "overlaps": b, "questions": len(benchmarks[a]),
                             "overlapping": overlapping, "different_answers": differ})
    return rows


def load_training_texts(path) -> tuple[list[str], object]:
    """The texts of a training set: a ``synthesize`` output folder / a ``datasets`` folder (column
    ``text``), or a benchmark-format ``.jsonl``/``.json`` file (``en_question``). Also returns what
    :func:`save_kept` needs to write the kept items back in the same form."""
    from pathlib import Path

    path = Path(path)
    folder = path / "dataset" if (path / "dataset").is_dir() else path
    if folder.is_dir() and (folder / "dataset_info.json").is_file():
        from datasets import load_from_disk

        data = load_from_disk(str(folder))
        column = "text" if "text" in data.column_names else "prompt" if "prompt" in data.column_names else None
        if column is None:
            raise input_error("decontaminate", "TRAIN", "a dataset with a 'text' column", str(path))
        return [str(t) for t in data[column]], data
    if path.is_file():
        import json

        from .bench import _records

        records = [r for _, r in _records(path)]
        if not all(isinstance(r, dict) and "en_question" in r for r in records):
            raise input_error("decontaminate", "TRAIN", "JSON records with 'en_question'", str(path))
        return [str(r["en_question"]) for r in records], ("records", records, json)
    raise input_error("decontaminate", "TRAIN", "a synthesize output folder, a datasets folder or a .jsonl file",
                      str(path))


def save_kept(source, keep: Iterable[int], out) -> None:
    """Write the training items at positions ``keep`` to ``out`` in their original form."""
    from pathlib import Path

    keep = list(keep)
    out = Path(out)
    if isinstance(source, tuple):
        _, records, json = source
        from icml26.utils import atomic_write_text

        atomic_write_text(out, "".join(json.dumps(records[k], ensure_ascii=False) + "\n" for k in keep))
    else:
        source.select(keep).save_to_disk(str(out))
