"""The catalogue of the papers icml26 implements: one source for ``icml26 list``, the README table and the layout.

Each entry names the paper, its **homes** (where its code lives: at most one per layer, each named by the paper's
key, as ``tests/test_layout.py`` enforces), the kernels it uses (named by op, shared between methods), its CLI and a
status: ``planned`` (nothing landed), ``partial`` (some of the issue landed) or ``working`` (the issue is resolved).
Update the status here when a method lands, then regenerate the README table with ``python -m icml26.papers``
(a test keeps the two in step).

The layers a home can sit in, in order: ``models/K``, ``training/K``, ``agents/K/``, ``eval/tasks/K``,
``eval/experiments/K.py``, ``eval/benchmarks/K.py``, ``docs/methods/K.md``; a home with several modules is a
package (a folder, written with a trailing ``/``) whose ``__init__.py`` is its public face.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import input_error

STATUSES = ("planned", "partial", "working")
#: Where a home may sit, as path prefixes relative to the repository root.
LAYERS = ("models/", "training/", "agents/", "eval/tasks/", "eval/experiments/", "eval/benchmarks/", "docs/methods/")


@dataclass(frozen=True)
class Paper:
    """One paper: its key, names, homes (paths relative to the repository root), kernels, CLI and status."""

    key: str
    name: str
    title: str
    homes: tuple[str, ...]
    cli: str
    status: str = "planned"
    kernels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise input_error(f"Paper({self.key!r})", "status", f"one of {STATUSES}", self.status)
        for home in self.homes:
            layer = next((layer for layer in LAYERS if home.startswith(layer)), None)
            name = home[len(layer):].rstrip("/") if layer else ""
            if layer is None or name not in (self.key, f"{self.key}.py", f"{self.key}.md"):
                raise input_error(f"Paper({self.key!r})", "homes", f"paths <layer>/{self.key}[.py|.md|/] with a layer "
                                  f"in {LAYERS}", home)

    def home(self, layer: str) -> str | None:
        """This paper's home in ``layer`` (one of :data:`LAYERS`), or None."""
        return next((h for h in self.homes if h.startswith(layer)), None)


def _homes(key: str, *layers: str) -> tuple[str, ...]:
    """The homes of ``key`` in the given layers, written the one way: ``"training/"`` -> ``training/K/`` (a
    package), ``"training"`` -> ``training/K.py``; ``eval/experiments``, ``eval/benchmarks`` (modules) and
    ``docs/methods`` (a page) take their one form."""
    out = []
    for layer in layers:
        if layer.endswith("/"):
            out.append(f"{layer}{key}/")
        elif layer == "docs/methods":
            out.append(f"docs/methods/{key}.md")
        else:
            out.append(f"{layer}/{key}.py")
    return tuple(out)


EXPERIMENT = ("eval/experiments",)
BOTH = ("eval/experiments", "eval/benchmarks")
DOCS = ("docs/methods",)

PAPERS: tuple[Paper, ...] = (
    Paper("saisa", "SAISA / NAEViT",
          "SAISA: Towards Multimodal Large Language Models with Both Training and Inference Efficiency",
          _homes("saisa", "models/", "training", "eval/tasks", *BOTH, *DOCS),
          "icml26 reproduce saisa; icml26 bench naevit; icml26 bench saisa", status="working", kernels=("naevit",)),
    Paper("tfmixer", "TFMixer",
          "Bridging Time and Frequency: A Joint Modeling Framework for Irregular Multivariate Time Series Forecasting",
          _homes("tfmixer", "models/", "training", "eval/tasks/", *BOTH, *DOCS),
          "icml26 reproduce tfmixer; icml26 bench tfmixer; icml26 bench nudft", status="working", kernels=("nudft",)),
    Paper("r2g", "R2G",
          "Repel-to-Grokking (R2G) loss (exact ICML title not public)",
          _homes("r2g", "training/", "eval/tasks/", *BOTH, *DOCS), "icml26 reproduce r2g; icml26 bench r2g",
          status="working"),
    Paper("sera", "SERA",
          "SERA: Soft-Verified Efficient Repository Agents",
          _homes("sera", "training/", "agents/", "eval/tasks", *EXPERIMENT, *DOCS),
          "icml26 sera generate; icml26 sera train; icml26 reproduce sera", status="working"),
    Paper("optminer", "Opt-Miner",
          "Opt-Miner: Empowering Information-Seeking Agent with Tree-Guided Data Synthesis for Optimization Modeling",
          _homes("optminer", "training/", "agents/", "eval/tasks", *BOTH, *DOCS),
          "icml26 optminer synthesize; icml26 optminer validate; icml26 optminer decontaminate; "
          "icml26 optminer eval; icml26 bench optminer; icml26 reproduce optminer", status="working"),
    Paper("rhi", "Robust Halpern Iteration",
          "Model-Free Robust Average-Reward Reinforcement Learning with Sample Complexity Analysis",
          _homes("rhi", "training/", *EXPERIMENT, *DOCS), "icml26 reproduce rhi", status="working"),
    Paper("uhm", "Universal Horizon Models",
          "Offline Reinforcement Learning with Universal Horizon Models",
          _homes("uhm", "models", "training/", "eval/tasks", *BOTH, *DOCS), "icml26 reproduce uhm; icml26 bench uhm",
          status="working"),
    Paper("conjoint", "Conjoint stochastic interventions",
          "MiniMax Learning of Interpretable Factored Stochastic Policies from Conjoint Data, with Uncertainty Quantification",
          _homes("conjoint", "training/", "eval/tasks", *BOTH, *DOCS), "icml26 reproduce conjoint; icml26 bench conjoint",
          status="working"),
    Paper("infoloop", "Information-open synthetic data loops",
          "An Information-Theoretic Criterion for Efficient Data Synthesis",
          _homes("infoloop", "training/", "eval/tasks", *BOTH, *DOCS), "icml26 reproduce infoloop; icml26 bench infoloop",
          status="working"),
    Paper("llp", "Label-proportion debiasing",
          "Optimal Learning from Label Proportions with General Loss Functions",
          _homes("llp", "training/", "eval/tasks", *BOTH, *DOCS), "icml26 reproduce llp; icml26 bench llp", status="working"),
    Paper("dp_select", "Private hypothesis selection",
          "Fast and Optimal Algorithms for Private Hypothesis Selection",
          _homes("dp_select", "training/", "eval/tasks", *BOTH, *DOCS), "icml26 reproduce dp_select; icml26 bench dp_select",
          status="working"),
    Paper("rkme", "RKME learnware specifications",
          "A Statistical Framework for Analyzing Specification Resistance to Learnware-Inversion Risks",
          _homes("rkme", "training/", "eval/tasks", *BOTH, *DOCS), "icml26 reproduce rkme; icml26 bench rkme",
          status="working"),
    Paper("waterfill", "Contrastive waterfilling",
          "A Theory of Contrastive Learning with Natural Images",
          _homes("waterfill", "models", "training", "eval/tasks/", *BOTH, *DOCS),
          "icml26 reproduce waterfill; icml26 bench waterfill", status="working"),
    Paper("tied", "TIED",
          "Inverting Data Transformations via Diffusion Sampling",
          _homes("tied", "models/", "training", "eval/tasks", *BOTH, *DOCS), "icml26 reproduce tied; icml26 bench tied",
          status="working"),
    Paper("ortho_flow", "Orthogonal-Jacobian flows",
          "Unsupervised Disentanglement Without Compromises: How Functional Orthogonality Enforces Identifiability",
          _homes("ortho_flow", "models", "training", "eval/tasks", *BOTH, *DOCS),
          "icml26 reproduce ortho_flow; icml26 bench ortho_flow", status="working"),
    Paper("mol_diffusion", "Multi-objective diffusion distillation",
          "Multi-Objective Learning for Diffusion Models: A Statistical Theory under Semi-Supervised Learning",
          _homes("mol_diffusion", "models", "training/", "eval/tasks", *BOTH, *DOCS),
          "icml26 reproduce mol_diffusion; icml26 bench mol_diffusion", status="working"),
    Paper("crdproto", "CRDProto (low-rank noisy few-shot)",
          "Rank-guided Diffusion for Noise Few-Shot Learning",
          _homes("crdproto", "models/", "training", "eval/tasks", *BOTH, *DOCS),
          "icml26 reproduce crdproto; icml26 bench crdproto", status="working"),
    Paper("pbto", "PBTO",
          "Persistent Backdoor Attacks in Class-Incremental Learning via Structural Invariant Anchoring",
          _homes("pbto", "models", "training", "eval/tasks/", *BOTH, *DOCS),
          "icml26 reproduce pbto; icml26 bench pbto", status="working"),
    Paper("rdl_graph", "Relational graph optimization",
          "What Makes a Desired Graph for Relational Deep Learning?",
          _homes("rdl_graph", "models/", "training", "eval/tasks", *BOTH, *DOCS),
          "icml26 reproduce rdl_graph; icml26 bench rdl_graph", status="working"),
)

PAPERS_BY_KEY: dict[str, Paper] = {p.key: p for p in PAPERS}

#: Modules of ``models/``, ``training/`` and ``eval/tasks/`` that belong to no paper: each layer's shared
#: infrastructure (the layout test refuses any other module outside a home).
SHARED = (
    "models/__init__.py", "training/__init__.py", "training/distributed.py", "training/ema.py",
    "eval/tasks/__init__.py",
)

TABLE_BEGIN = "<!-- papers-table:begin (generated by `python -m icml26.papers`) -->"
TABLE_END = "<!-- papers-table:end -->"


def markdown_table() -> str:
    """The README's paper table, rendered from :data:`PAPERS`."""
    lines = [
        "| key | method | paper | homes | CLI | status |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for p in PAPERS:
        homes = [h for h in p.homes if not h.startswith("docs/")] + [f"kernels/{k}*" for k in p.kernels]
        page = p.home("docs/methods/")
        key = f"[`{p.key}`]({page})" if page else f"`{p.key}`"
        if p.status == "planned":  # nothing exists yet: show where it will go, not paths that look real
            where, cli = "planned: " + ", ".join(homes), f"planned: {p.cli}"
        else:
            where, cli = ", ".join(f"`{h}`" for h in homes), f"`{p.cli}`"
        lines.append(f"| {key} | {p.name} | {p.title} | {where} | {cli} | {p.status} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(TABLE_BEGIN)
    print(markdown_table())
    print(TABLE_END)
