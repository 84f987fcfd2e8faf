"""The catalogue of the papers icml26 implements: one source for ``icml26 list`` and the README table.

Each entry names the paper, where its code lives, its CLI and its experiment key, and a status:
``planned`` (nothing landed), ``partial`` (some of the issue landed) or ``working`` (the issue is
resolved). Update the status here when a method lands, then regenerate the README table with
``python -m icml26.papers`` (a test keeps the two in step).
"""

from __future__ import annotations

from dataclasses import dataclass
from .errors import input_error

STATUSES = ("planned", "partial", "working")


@dataclass(frozen=True)
class Paper:
    key: str
    name: str
    title: str
    modules: tuple[str, ...]
    cli: str
    status: str = "planned"

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise input_error(f"Paper({self.key!r})", "status", f"one of {STATUSES}", self.status)


PAPERS: tuple[Paper, ...] = (
    Paper("saisa", "SAISA / NAEViT",
          "SAISA: Towards Multimodal Large Language Models with Both Training and Inference Efficiency",
          ("kernels/naevit.py", "kernels/naevit_triton.py", "kernels/naevit_hf.py", "models/saisa/modeling.py",
           "training/saisa.py", "eval/tasks/saisa.py"),
          "icml26 reproduce saisa; icml26 bench naevit; icml26 bench saisa", status="working"),
    Paper("tfmixer", "TFMixer",
          "Bridging Time and Frequency: A Joint Modeling Framework for Irregular Multivariate Time Series Forecasting",
          ("kernels/nudft.py", "kernels/nudft_triton.py", "kernels/nudft_layers.py", "models/tfmixer/modeling.py",
           "eval/tasks/tfmixer/imts.py", "eval/tasks/tfmixer/physionet2012.py"),
          "icml26 reproduce tfmixer; icml26 bench tfmixer; icml26 bench nudft",
          status="working"),
    Paper("r2g", "R2G",
          "Repel-to-Grokking (R2G) loss (exact ICML title not public)",
          ("training/r2g/loss.py", "training/r2g/trainer.py", "training/r2g/grokfast.py", "eval/tasks/r2g/modular.py",
           "eval/tasks/r2g/tense.py"), "icml26 reproduce r2g", status="working"),
    Paper("sera", "SERA",
          "SERA: Soft-Verified Efficient Repository Agents",
          ("agents/backends.py", "agents/sandbox.py", "agents/loop.py", "agents/sera/", "training/sera.py",
           "eval/tasks/sera.py"),
          "icml26 sera generate; icml26 sera train; icml26 reproduce sera", status="working"),
    Paper("optminer", "Opt-Miner",
          "Opt-Miner: Empowering Information-Seeking Agent with Tree-Guided Data Synthesis for Optimization Modeling",
          ("agents/optminer/", "training/optminer.py", "eval/tasks/optminer.py"),
          "icml26 optminer synthesize; icml26 optminer validate; icml26 optminer decontaminate; "
          "icml26 optminer eval; icml26 bench optminer; icml26 reproduce optminer", status="working"),
    Paper("rhi", "Robust Halpern Iteration",
          "Model-Free Robust Average-Reward Reinforcement Learning with Sample Complexity Analysis",
          ("training/rhi/halpern.py", "training/rhi/oracles.py"), "icml26 reproduce rhi", status="working"),
    Paper("uhm", "Universal Horizon Models",
          "Offline Reinforcement Learning with Universal Horizon Models",
          ("models/uhm.py", "training/uhm/horizons.py", "training/uhm/targets.py", "training/uhm/actor_critic.py",
           "eval/tasks/uhm.py"), "icml26 reproduce uhm; icml26 bench uhm", status="working"),
    Paper("conjoint", "Conjoint stochastic interventions",
          "MiniMax Learning of Interpretable Factored Stochastic Policies from Conjoint Data, with Uncertainty Quantification",
          ("training/conjoint/policy.py", "training/conjoint/model.py", "training/conjoint/minimax.py",
           "eval/tasks/conjoint.py"),
          "icml26 reproduce conjoint; icml26 bench conjoint", status="working"),
    Paper("infoloop", "Information-open synthetic data loops",
          "An Information-Theoretic Criterion for Efficient Data Synthesis",
          ("training/infoloop.py",), "icml26 reproduce infoloop"),
    Paper("llp", "Label-proportion debiasing",
          "Optimal Learning from Label Proportions with General Loss Functions",
          ("training/llp/risk.py", "training/llp/trainer.py", "training/llp/estimator.py", "eval/tasks/llp.py"),
          "icml26 reproduce llp; icml26 bench llp", status="working"),
    Paper("dp_select", "Private hypothesis selection",
          "Fast and Optimal Algorithms for Private Hypothesis Selection",
          ("training/dp_select/selection.py", "training/dp_select/noise.py",
           "training/dp_select/strong.py", "training/dp_select/covers.py",
           "training/dp_select/audit.py", "eval/tasks/dp_select.py"),
          "icml26 reproduce dp_select; icml26 bench dp_select", status="working"),
    Paper("rkme", "RKME learnware specifications",
          "A Statistical Framework for Analyzing Specification Resistance to Learnware-Inversion Risks",
          ("training/rkme/spec.py", "training/rkme/market.py", "eval/tasks/rkme.py"),
          "icml26 reproduce rkme; icml26 bench rkme", status="working"),
    Paper("waterfill", "Contrastive waterfilling",
          "A Theory of Contrastive Learning with Natural Images",
          ("training/waterfill.py",), "icml26 reproduce waterfill"),
    Paper("tied", "TIED",
          "Inverting Data Transformations via Diffusion Sampling",
          ("models/tied/", "eval/tasks/tied.py"), "icml26 reproduce tied; icml26 bench tied", status="working"),
    Paper("ortho_flow", "Orthogonal-Jacobian flows",
          "Unsupervised Disentanglement Without Compromises: How Functional Orthogonality Enforces Identifiability",
          ("models/ortho_flow.py",), "icml26 reproduce ortho_flow"),
    Paper("mol_diffusion", "Multi-objective diffusion distillation",
          "Multi-Objective Learning for Diffusion Models: A Statistical Theory under Semi-Supervised Learning",
          ("models/mol_diffusion.py",), "icml26 reproduce mol_diffusion"),
    Paper("crdproto", "CRDProto (low-rank noisy few-shot)",
          "Rank-guided Diffusion for Noise Few-Shot Learning",
          ("models/crdproto.py",), "icml26 reproduce crdproto"),
    Paper("pbto", "PBTO",
          "Persistent Backdoor Attacks in Class-Incremental Learning via Structural Invariant Anchoring",
          ("training/pbto.py",), "icml26 reproduce pbto"),
    Paper("rdl_graph", "Relational graph optimization",
          "What Makes a Desired Graph for Relational Deep Learning?",
          ("models/rdl_graph/modeling.py", "models/rdl_graph/templates.py", "training/rdl_graph.py", "eval/tasks/rdl_graph.py"),
          "icml26 reproduce rdl_graph; icml26 bench rdl_graph", status="working"),
)

PAPERS_BY_KEY: dict[str, Paper] = {p.key: p for p in PAPERS}

TABLE_BEGIN = "<!-- papers-table:begin (generated by `python -m icml26.papers`) -->"
TABLE_END = "<!-- papers-table:end -->"


def markdown_table() -> str:
    """The README's paper table, rendered from :data:`PAPERS`."""
    lines = [
        "| key | method | paper | modules | CLI | experiment | status |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in PAPERS:
        if p.status == "planned":  # nothing exists yet: show where it will go, not paths that look real
            modules = "planned: " + ", ".join(p.modules)
            cli, exp = f"planned: {p.cli}", f"planned: eval/experiments/{p.key}.py"
        else:
            modules = ", ".join(f"`{m}`" for m in p.modules)
            cli, exp = f"`{p.cli}`", f"`eval/experiments/{p.key}.py`"
        lines.append(f"| `{p.key}` | {p.name} | {p.title} | {modules} | {cli} | {exp} | {p.status} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(TABLE_BEGIN)
    print(markdown_table())
    print(TABLE_END)
