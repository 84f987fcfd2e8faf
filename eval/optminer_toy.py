"""The R-GRPO toy task (Opt-Miner spec section 5): a fogged constant that only retrieval reveals.

Each task names a plant ("Plant K7 runs 10 shifts. How many units does it make?"). The plant's capacity per shift
was *fogged* out of the question into a document of a BM25-searched corpus ("Plant K7 makes 37 units per shift"),
next to distractors (every plant's staff count, a document that shares the plant code and another number). The
answer is ``capacity * shifts`` with ``shifts`` in {1, 10, 100}: a simple function of the retrieved constant and the
number in the question, chosen so that a 2-layer model can compute it token by token (digits are single tokens of
the tiny tokenizer; the multiplication appends zeros). Held-out tasks use plants never seen in training, so the
constant cannot be memorised: without the tool a policy can only guess.

Pipeline (:func:`run_toy`): a tiny Qwen3 from config (``icml26.tiny``); an SFT cold start with TRL's
``SFTTrainer`` on scripted trajectories (``<think>`` - a ``search`` tool call - the tool response - ``<answer>``)
for a fixed, small number of steps (``ToyRecipe.sft_steps``), so that the cold start can be partial; then
:class:`~icml26.training.rgrpo.RGRPOTrainer`
(TRL ``GRPOTrainer(tools=[search])``, G = 4). Rewards are measured on 50 held-out tasks with greedy multi-turn
rollouts for: the SFT policy, the SFT + R-GRPO policy, and the SFT + R-GRPO policy with the tool disabled (the
search returns no document). The ablation disables the tool at evaluation rather than training a second policy
without it: it isolates how much of the reward depends on the retrieved constant, and costs no second training run
(a policy trained without the tool could not reach the constant either, so it would only score chance).

Cost: TRL's Qwen2.5 template renders the tool schema and its instructions into every prompt, so a trajectory is
about 600 tokens although the task needs about 150; what the tiny model must learn (copying the plant code into
the query and the digits out of the tool response) only appears after a couple of hundred SFT steps.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

__all__ = [
    "MODES", "SYSTEM_PROMPT", "ToyRecipe", "ToyTask",
    "evaluate_policy", "make_toy_search", "make_toy_world", "run_toy", "scripted_trajectory", "toy_prompt",
]

SYSTEM_PROMPT = "Find plant facts with search. Reply <answer>number</answer>."
SHIFTS = (1, 10, 100)
_LETTERS = "ABCDEFGHJKLMNPRSTUVWXYZ"


@dataclass(frozen=True)
class ToyTask:
    """One fogged task: the question hides ``capacity``, found only in document ``gold_doc``."""

    plant: str
    capacity: int
    shifts: int
    question: str
    answer: float
    gold_doc: str  # the rendered id of the capacity document, e.g. "[K7-cap]"


@dataclass(frozen=True)
class ToyRecipe:
    """Sizes and hyper-parameters of one :func:`run_toy` mode.

    ``sft_steps=400``: with 200 steps the tiny model had not yet learnt to copy the plant code and the digits
    (held-out reward 0 for every arm, seed 0); with 400 it reached 0.22 with the tool and 0 without. ``grpo_lr``:
    at 1e-3 the R-GRPO policy stopped calling the tool after about ten steps and its reward fell to 0 (seed 0), so
    the default is lowered to 1e-4, which has not been measured yet.
    """

    n_plants: int = 160
    n_eval: int = 50
    n_sft: int = 200
    sft_steps: int = 400
    sft_lr: float = 5e-3
    sft_batch: int = 8
    grpo_steps: int = 30
    grpo_lr: float = 1e-4
    grpo_prompts_per_step: int = 2
    num_generations: int = 4
    temperature: float = 1.0
    max_completion_length: int = 256
    hidden_size: int = 64
    num_layers: int = 2


MODES: dict[str, ToyRecipe] = {
    "quick": ToyRecipe(),
    "full": ToyRecipe(n_plants=400, n_sft=400, sft_steps=800, grpo_steps=100, grpo_prompts_per_step=8,
                      hidden_size=128, num_layers=4),
}


def _plant_codes(n: int, rng: random.Random) -> list[str]:
    codes = sorted({f"{letter}{number}" for letter in _LETTERS for number in range(1, 100)})
    if n > len(codes):
        raise ValueError(f"n_plants must be at most {len(codes)}, got {n}")
    return rng.sample(codes, n)


def make_toy_world(seed: int, n_plants: int = 160) -> tuple[list, dict[str, int]]:
    """The corpus and the hidden constants: ``(documents, {plant: capacity})``.

    Per plant a capacity document (the fogged fact) and a staff document (same plant code, another number);
    capacities are two-digit numbers not ending in 0 (the tiny tokenizer merges "00").
    """
    from icml26.agents.optminer.retrieval import Document

    rng = random.Random(seed)
    capacities = {code: rng.choice([c for c in range(11, 100) if c % 10]) for code in _plant_codes(n_plants, rng)}
    documents = []
    for code, capacity in capacities.items():
        documents.append(Document(f"{code}-cap", f"Plant {code} capacity",
                                  f"Plant {code} makes {capacity} units per shift."))
        documents.append(Document(f"{code}-staff", f"Plant {code} staff",
                                  f"Plant {code} employs {rng.randint(11, 99)} workers."))
    return documents, capacities


def make_tasks(capacities: dict[str, int], plants: list[str], rng: random.Random, n: int) -> list[ToyTask]:
    """``n`` tasks over ``plants`` (cycled, shuffled), each with a random number of shifts."""
    tasks = []
    for i in range(n):
        plant = plants[i % len(plants)]
        shifts = rng.choice(SHIFTS)
        question = f"Plant {plant} runs {shifts} shifts. How many units does it make?"
        tasks.append(ToyTask(plant, capacities[plant], shifts, question, float(capacities[plant] * shifts),
                             f"[{plant}-cap]"))
    rng.shuffle(tasks)
    return tasks


def toy_prompt(task: ToyTask) -> list[dict]:
    """The chat prompt of a task (system + user turns)."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.question}]


def scripted_trajectory(task: ToyTask, search: Callable[[str], str]) -> list[dict]:
    """The SFT demonstration: think, call ``search``, read the real tool response, answer."""
    query = f"capacity of plant {task.plant}"
    return [
        *toy_prompt(task),
        {"role": "assistant", "content": f"<think>find plant {task.plant}</think>",
         "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": query}}}]},
        {"role": "tool", "name": "search", "content": search(query)},
        {"role": "assistant", "content": f"<answer>{int(task.answer)}</answer>"},
    ]


def evaluate_policy(model, tokenizer, tasks: list[ToyTask], tools: list[Callable], reward_func,
                    max_completion_length: int) -> dict[str, float]:
    """Greedy multi-turn rollouts on ``tasks``: mean reward and the fraction of rollouts that called a tool."""
    from icml26.training.rgrpo import rollout_with_tools

    was_training = model.training
    model.eval()
    completions = rollout_with_tools(model, tokenizer, [toy_prompt(t) for t in tasks], tools,
                                     max_new_tokens=64, max_completion_length=max_completion_length, max_turns=1)
    model.train(was_training)
    rewards = reward_func(completions=completions, answer=[t.answer for t in tasks])
    called = [any(m.get("role") == "tool" for m in c) for c in completions]
    return {"reward": sum(rewards) / len(rewards), "tool_rate": sum(called) / len(called)}


def make_toy_search(corpus, k: int = 3) -> Callable[[str], str]:
    """``search(query) -> str`` over ``corpus`` (``corpus=None``: the disabled tool, which never finds anything).

    The same formatting as ``icml26.agents.optminer.retrieval.make_search_tool``, with a one-line description:
    the tool schema is rendered into every prompt, and a tiny model pays for each token of it.
    """
    from icml26.agents.optminer.retrieval import format_documents

    def search(query: str) -> str:
        """Search the plant documents.

        Args:
            query: keywords
        """
        return format_documents([] if corpus is None else corpus.search(str(query), k=k))

    return search


def _quiet(trainer):
    """Drop the callback that prints every log dict (the caller reads ``state.log_history``)."""
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer


def run_toy(seed: int, mode: str = "quick", device: str = "cpu", *, recipe: ToyRecipe | None = None,
            output_dir: str | None = None) -> dict[str, Any]:
    """SFT cold start, then R-GRPO with the search tool, on the fogged toy task; rewards on 50 held-out tasks.

    Returns ``reward_sft`` (SFT only), ``reward_rgrpo`` (SFT + R-GRPO), ``reward_notool`` (SFT + R-GRPO evaluated
    with the search tool disabled: it answers "No document matched"), ``reward_sft_notool``, ``reward_curve``
    (TRL's mean training reward per GRPO step), ``tool_rate_sft`` / ``tool_rate_rgrpo`` (fraction of held-out
    rollouts that searched), ``masked_fraction`` (share of completion tokens excluded from the loss as retrieved),
    and ``seconds``.
    """
    import tempfile

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import get_json_schema
    from trl import SFTConfig, SFTTrainer

    from icml26.agents.optminer.retrieval import BM25Corpus
    from icml26.tiny import build_tiny_model
    from icml26.training.rgrpo import RGRPOConfig, RGRPOTrainer, make_answer_reward

    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, got {mode!r}")
    if device not in ("cpu", "cuda") and not str(device).startswith("cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {device!r}")
    recipe = recipe or MODES[mode]
    start = time.perf_counter()
    rng = random.Random(seed)
    torch.manual_seed(seed)

    documents, capacities = make_toy_world(seed, recipe.n_plants)
    search = make_toy_search(BM25Corpus(documents, k=3))
    plants = sorted(capacities)
    rng.shuffle(plants)
    eval_plants, train_plants = plants[: recipe.n_eval], plants[recipe.n_eval:]
    eval_tasks = make_tasks(capacities, eval_plants, rng, recipe.n_eval)
    sft_tasks = make_tasks(capacities, train_plants, rng, recipe.n_sft)
    rl_tasks = make_tasks(capacities, train_plants, rng, recipe.grpo_steps * recipe.grpo_prompts_per_step)

    path = build_tiny_model("qwen3", hidden_size=recipe.hidden_size, num_layers=recipe.num_layers,
                            intermediate_size=2 * recipe.hidden_size, max_position_embeddings=1024, seed=seed)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(device)
    use_cpu = device == "cpu"
    reward = make_answer_reward(tolerance=1e-4)
    workdir = output_dir or tempfile.mkdtemp(prefix="optminer-toy-")
    common = dict(report_to=[], save_strategy="no", use_cpu=use_cpu, bf16=False, seed=seed, data_seed=seed,
                  disable_tqdm=True, dataloader_num_workers=0, gradient_checkpointing=False)

    # SFT cold start (partial on purpose: few steps, so that RL has something left to learn)
    tools_json = json.dumps([get_json_schema(search)])
    sft_data = Dataset.from_list([{"messages": scripted_trajectory(t, search), "tools": tools_json}
                                  for t in sft_tasks])
    sft_args = SFTConfig(output_dir=f"{workdir}/sft", max_steps=recipe.sft_steps, learning_rate=recipe.sft_lr,
                         per_device_train_batch_size=recipe.sft_batch, assistant_only_loss=True,
                         lr_scheduler_type="constant", warmup_steps=0, logging_steps=10, max_length=1024,
                         **common)
    _quiet(SFTTrainer(model=model, args=sft_args, train_dataset=sft_data, processing_class=tokenizer)).train()

    max_len = recipe.max_completion_length
    sft_eval = evaluate_policy(model, tokenizer, eval_tasks, [search], reward, max_len)
    sft_notool = evaluate_policy(model, tokenizer, eval_tasks, [make_toy_search(None)], reward, max_len)

    # R-GRPO
    rl_data = Dataset.from_list([{"prompt": toy_prompt(t), "answer": t.answer, "gold_doc": t.gold_doc}
                                 for t in rl_tasks])
    batch = recipe.grpo_prompts_per_step * recipe.num_generations
    rl_args = RGRPOConfig(output_dir=f"{workdir}/rgrpo", max_steps=recipe.grpo_steps, learning_rate=recipe.grpo_lr,
                          per_device_train_batch_size=batch, num_generations=recipe.num_generations,
                          max_completion_length=max_len, max_tool_calling_iterations=1,
                          temperature=recipe.temperature, logging_steps=1, lr_scheduler_type="constant",
                          warmup_steps=0, reward_tolerance=1e-4, **common,
                          generation_backend="transformers" if use_cpu else "auto")
    trainer = RGRPOTrainer(model=model, args=rl_args, train_dataset=rl_data, processing_class=tokenizer,
                           tools=[search])
    _quiet(trainer)
    trainer.train()
    history = [h for h in trainer.state.log_history if "reward" in h]
    curve = [float(h["reward"]) for h in history]
    masked = [float(h["tools/masked_fraction"]) for h in history if "tools/masked_fraction" in h]

    rl_eval = evaluate_policy(model, tokenizer, eval_tasks, [search], reward, max_len)
    rl_notool = evaluate_policy(model, tokenizer, eval_tasks, [make_toy_search(None)], reward, max_len)
    return {
        "reward_sft": sft_eval["reward"],
        "reward_rgrpo": rl_eval["reward"],
        "reward_notool": rl_notool["reward"],
        "reward_sft_notool": sft_notool["reward"],
        "reward_curve": curve,
        "tool_rate_sft": sft_eval["tool_rate"],
        "tool_rate_rgrpo": rl_eval["tool_rate"],
        "masked_fraction": sum(masked) / len(masked) if masked else 0.0,
        "seconds": time.perf_counter() - start,
    }
