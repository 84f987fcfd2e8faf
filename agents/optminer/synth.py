"""Seeded synthesis of verified Opt-Miner instances, their document corpus and a scripted modeller.

:func:`synthesize` draws each instance from its own generator ``default_rng([seed, i])``:
a scenario with one technique, then (with the given probabilities) a union with a second
scenario, a technique transferred from a donor problem, and knowledge fogging. Every instance is
solved with HiGHS and CBC and kept only when both find an optimum (feasible, bounded) and agree
within ``rtol``, and when its optimum stays the same without the bounds its text does not state and
with every big-M constant widened tenfold; otherwise the instance is drawn again with the next
attempt's generator. Every upper bound of a scenario variable is either stated in the text (a
parameter sentence) or implied by a stated constraint (a lane ships at most its source's supply, a
depot serves at most its capacity), so what the text says is the whole model
(:mod:`~.validate` rebuilds it from the text to check).

:func:`scripted_modeller` is a rule-based stand-in for a modelling agent, used to measure
knowledge gaps: it knows the tree's structure but must read every number from the problem text
(and from any documents it is given) through the number's sentence; a number it cannot find is
taken as 0 (the technique treated as absent).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from icml26.errors import InputTypeError, described, input_error
from icml26.validation import check_finite, check_int

from .operators import fog, transfer, union
from .retrieval import Document, ExistingPathError
from .solve import agree, bounds_bind
from .templates import SCENARIOS, TECHNIQUES, apply_technique, distractor_documents, new_scenario
from .tree import ProblemTree, read_param

STAT_KEYS = ("attempts", "rejected_operator", "rejected_solver", "rejected_unstated_bound")
CPU_KEYS = ("process", "cbc")


@dataclass
class Instance:
    id: str
    text: str
    documents: list[dict]
    objective: float
    cbc_objective: float
    sense: str
    fogged: bool
    techniques: list[str]
    scenarios: list[str]
    operators: list[str]
    tree: str  # ProblemTree JSON

    def problem_tree(self) -> ProblemTree:
        return ProblemTree.from_json(self.tree)


def _with_technique(rng, exclude_sites: Iterable[str] = ()) -> ProblemTree:
    from .templates import SITES

    sites = [s for s in SITES if s not in set(exclude_sites)]
    for _ in range(10):
        tree = new_scenario(str(rng.choice(list(SCENARIOS))), rng, site=str(rng.choice(sites)))
        try:
            apply_technique(tree, str(rng.choice(TECHNIQUES)), rng)
            return tree
        except ValueError:
            continue
    raise RuntimeError("could not attach a technique in 10 draws")  # pragma: no cover


def draw_tree(rng, *, union_prob: float = 0.3, transfer_prob: float = 0.3, fog_prob: float = 0.6) -> ProblemTree:
    """One synthetic problem tree (not yet verified by two solvers)."""
    tree = _with_technique(rng)
    if rng.random() < union_prob:
        other = _with_technique(rng, exclude_sites=[s.site for s in tree.scenarios])
        tree = union(tree, other, rng)
    if rng.random() < transfer_prob:
        donor = _with_technique(rng)
        try:
            tree = transfer(donor, tree, rng)
        except ValueError:
            pass  # no free target for that technique in this scenario: keep the tree as it is
    if rng.random() < fog_prob:
        tree = fog(tree, rng)
    return tree


class _Clock:
    """Seconds per phase, added into ``seconds`` (a dict; None: not timed)."""

    def __init__(self, seconds: dict | None):
        self.seconds = seconds

    @contextlib.contextmanager
    def __call__(self, phase: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.seconds is not None:
                self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start


def make_instance(tree: ProblemTree, instance_id: str, rtol: float = 1e-6, stats: dict | None = None,
                  seconds: dict | None = None) -> Instance | None:
    """Solve with both solvers; an :class:`Instance` when valid, else ``None`` (counted in ``stats``).

    Valid: HiGHS and CBC agree on an optimum, and that optimum does not depend on a bound the text
    leaves unstated or on the size of a big-M constant (:func:`~.solve.bounds_bind`). CBC runs as a
    subprocess started first, so it solves while this process does the HiGHS solves and the
    rendering; ``seconds`` collects the time of each phase (``cbc_start``: writing its model file and
    starting it; ``cbc_wait``: what is left to wait for it).
    """
    clock = _Clock(seconds)
    model = tree.to_model()
    with clock("cbc_start"):
        cbc_run = model.start_cbc()
    with clock("highs"):
        highs = model.solve_highs()
    binds = inst = None
    if highs.optimal:
        with clock("bound_check"):
            binds = bounds_bind(tree, highs.objective)
        if not binds:
            with clock("render"):
                named = tree.copy(id=instance_id)
                inst = Instance(id=instance_id, text=named.render_text(),
                                documents=[d.to_dict() for d in named.documents()], objective=highs.objective,
                                cbc_objective=float("nan"), sense=named.model.objective.sense,
                                fogged=bool(named.fogged_params()), techniques=[t.tag for t in named.techniques],
                                scenarios=[s.template for s in named.scenarios], operators=list(named.history),
                                tree=named.to_json())
    with clock("cbc_wait"):
        cbc = cbc_run.result()
    if not (highs.optimal and cbc.optimal and agree(highs.objective, cbc.objective, rtol)):
        if stats is not None:
            stats["rejected_solver"] += 1
        return None
    if binds:
        if stats is not None:
            stats["rejected_unstated_bound"] += 1
        return None
    inst.cbc_objective = cbc.objective
    return inst


def _cpu_now() -> dict:
    """CPU seconds of this process (``time.process_time``) and of its reaped child processes (the CBC runs)."""
    import os

    t = os.times()
    return {"process": time.process_time(), "cbc": t.children_user + t.children_system}


def _draw_valid(job: tuple) -> tuple[Instance, dict]:
    """Instance ``i``: the first valid draw among generators ``default_rng([seed, i, attempt])``."""
    seed, i, probs, rtol, max_attempts = job
    stats: dict = dict.fromkeys(STAT_KEYS, 0)
    stats["seconds"] = {}
    start = _cpu_now()
    try:
        return _draw_attempts(seed, i, probs, rtol, max_attempts, stats), stats
    finally:  # every CBC run of the job has been waited for, so its CPU time is in children's
        stats["cpu_seconds"] = {k: v - start[k] for k, v in _cpu_now().items()}


def _draw_attempts(seed: int, i: int, probs: dict, rtol: float, max_attempts: int, stats: dict) -> Instance:
    seconds = stats["seconds"]
    clock = _Clock(seconds)
    for attempt in range(max_attempts):
        rng = np.random.default_rng([seed, i, attempt])
        stats["attempts"] += 1
        try:
            with clock("draw"):  # templates and operators, with the solves union makes of its parents
                tree = draw_tree(rng, **probs)
        except ValueError:
            stats["rejected_operator"] += 1
            continue
        inst = make_instance(tree, f"om-{seed}-{i}", rtol, stats, seconds)
        if inst is not None:
            return inst
    raise RuntimeError(f"instance {i}: no valid draw in {max_attempts} attempts")


def synthesize(n: int, seed: int = 0, *, union_prob: float = 0.3, transfer_prob: float = 0.3, fog_prob: float = 0.6,
               rtol: float = 1e-6, max_attempts: int = 20, workers: int = 1,
               progress: bool = True) -> tuple[list[Instance], dict]:
    """``n`` verified instances and statistics (attempts, rejections by cause, ``seconds`` per phase and
    ``cpu_seconds`` summed over workers: ``process``, the ``time.process_time`` of the process that drew
    each instance, and ``cbc``, its CBC subprocesses'; neither counts starting the worker processes).

    Instance ``i`` depends only on ``(seed, i)``, so the output is the same for any ``workers``
    (processes; 1 runs in this process).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise input_error("synthesize", "n", "a positive int", n)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise input_error("synthesize", "workers", "a positive int", workers)
    for name, p in (("union_prob", union_prob), ("transfer_prob", transfer_prob), ("fog_prob", fog_prob)):
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise input_error("synthesize", name, "a probability in [0, 1]", p)
    seed = check_int("synthesize", "seed", seed, low=0)
    rtol = check_finite("synthesize", "rtol", rtol, positive=True)
    max_attempts = check_int("synthesize", "max_attempts", max_attempts, low=1)
    from tqdm.auto import tqdm

    probs = {"union_prob": union_prob, "transfer_prob": transfer_prob, "fog_prob": fog_prob}
    jobs = [(seed, i, probs, rtol, max_attempts) for i in range(n)]
    bar = tqdm(total=n, desc="synthesising", disable=not progress, unit="inst")
    if workers == 1:
        results = []
        for job in jobs:
            results.append(_draw_valid(job))
            bar.update()
    else:
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor

        from icml26.processes import die_with_parent

        # workers die with the run that started them, even when it is SIGKILLed
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                 initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
            results = []
            for result in pool.map(_draw_valid, jobs, chunksize=max(1, n // (4 * workers))):
                results.append(result)
                bar.update()
    bar.close()
    stats = dict.fromkeys(STAT_KEYS, 0)
    seconds: dict[str, float] = {}
    cpu = dict.fromkeys(CPU_KEYS, 0.0)
    for _, s in results:
        for key in STAT_KEYS:
            stats[key] += s[key]
        for phase, value in s["seconds"].items():
            seconds[phase] = seconds.get(phase, 0.0) + value
        for key in CPU_KEYS:
            cpu[key] += s["cpu_seconds"][key]
    stats["seconds"] = {k: round(v, 4) for k, v in sorted(seconds.items())}
    stats["cpu_seconds"] = {k: round(v, 4) for k, v in cpu.items()}
    return [inst for inst, _ in results], stats


def build_corpus(instances: Sequence[Instance], seed: int = 0, distractors_per_doc: int = 2) -> list[Document]:
    """Every instance's knowledge documents plus ``distractors_per_doc`` distractors per document."""
    seed = check_int("build_corpus", "seed", seed, low=0)
    distractors_per_doc = check_int("build_corpus", "distractors_per_doc", distractors_per_doc, low=0)
    if isinstance(instances, (str, bytes)) or not all(isinstance(i, Instance) for i in instances):
        raise InputTypeError("build_corpus", "instances", "a sequence of Instance (from synthesize)",
                             described(type(instances).__name__))
    docs: dict[str, Document] = {}
    for inst in instances:
        for d in inst.documents:
            doc = Document.from_dict(d)
            doc_id, k = doc.id, 1
            while doc_id in docs and docs[doc_id] != doc:
                k += 1
                doc_id = f"{doc.id}-{k}"
            docs[doc_id] = dataclasses.replace(doc, id=doc_id)
    rng = np.random.default_rng([seed, 7919])
    for doc in distractor_documents(rng, distractors_per_doc * len(docs)):
        if doc.id not in docs:
            docs[doc.id] = doc
    return list(docs.values())


def to_dataset(instances: Sequence[Instance]):
    """A ``datasets.Dataset`` with one row per instance (documents as a list of {id, title, text})."""
    from datasets import Dataset

    return Dataset.from_list([dataclasses.asdict(i) for i in instances])


def save(instances: Sequence[Instance], corpus: Sequence[Document], out_dir: str | Path, *,
         overwrite: bool = False) -> Path:
    """``out_dir/dataset`` (``Dataset.save_to_disk``) and ``out_dir/corpus/*.md`` (for ``BM25Corpus.from_folder``).

    Refuses to write into an existing ``dataset``/``corpus`` folder unless ``overwrite`` (then both
    are replaced), so documents of an older run never mix with the new corpus.
    """
    import shutil

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ExistingPathError("save", "out_dir", "a folder to write into (or a path to create)",
                                described(f"{str(out)!r}, an existing file"))
    folder = out / "corpus"
    existing = [p for p in (out / "dataset", folder) if p.exists()]
    if existing and not overwrite:
        raise ExistingPathError("save", "out_dir", "a folder whose dataset/ and corpus/ do not already exist "
                                "(or overwrite=True)", described(", ".join(p.name for p in existing) + f" in {out}"))
    for path in existing:
        shutil.rmtree(path)
    out.mkdir(parents=True, exist_ok=True)
    to_dataset(instances).save_to_disk(str(out / "dataset"))
    folder.mkdir()
    for doc in corpus:
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in doc.id)
        (folder / f"{safe}.md").write_text(f"# {doc.title}\n\n{doc.text}\n", encoding="utf-8")
    return out


# -- the scripted modeller --------------------------------------------------------------------------
@dataclass
class ModellerResult:
    objective: float | None
    correct: bool
    missing: list[str]


def scripted_modeller(tree: ProblemTree, text: str, documents: Sequence[Document | str] = (), *,
                      reference: float | None = None, rtol: float = 1e-6) -> ModellerResult:
    """Rebuild the model with every number read from ``text`` (then ``documents``) and solve it.

    Unreadable numbers become 0. ``correct`` compares with ``reference`` (default: the tree's own
    optimum) using SIRL's relative error.
    """
    if not isinstance(tree, ProblemTree):
        raise InputTypeError("scripted_modeller", "tree", "a ProblemTree", described(type(tree).__name__))
    if not isinstance(text, str):
        raise InputTypeError("scripted_modeller", "text", "a string", described(type(text).__name__))
    rtol = check_finite("scripted_modeller", "rtol", rtol, positive=True)
    sources = [text] + [d.text if isinstance(d, Document) else str(d) for d in documents]
    values, missing = {}, []
    for key, param in tree.params.items():
        value = read_param(param, *sources)
        if value is None:
            missing.append(key)
            value = 0.0
        values[key] = value
    solution = tree.to_model(values).solve_highs()
    if reference is None:
        reference = tree.to_model().solve_highs().objective
    return ModellerResult(solution.objective, agree(solution.objective, reference, rtol), missing)
