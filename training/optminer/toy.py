"""Opt-Miner's R-GRPO on the fogged toy task, end to end: SFT cold start, then R-GRPO with the search tool.

:func:`run_toy` is the pipeline (task: :mod:`icml26.eval.tasks.optminer`): a tiny Qwen3 from config; an SFT cold
start with TRL's ``SFTTrainer`` on the scripted teacher's trajectories; then :class:`~icml26.training.optminer.RGRPOTrainer`
(TRL ``GRPOTrainer(tools=[search])``, retrieved tokens out of the loss); rewards on held-out tasks with greedy
multi-turn rollouts, with the search tool and with it disabled. Reconstruction: our toy for the paper's R-GRPO stage
(ICML 2026 poster 65154; only the abstract is public).
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from typing import Any

from icml26.errors import input_error
from icml26.eval.tasks.optminer import (
    MODES,
    ToyRecipe,
    ToyTask,
    make_tasks,
    make_toy_search,
    make_toy_world,
    scripted_trajectory,
    toy_prompt,
    toy_tokenizer,
)
from icml26.training.optminer.rgrpo import rollout_with_tools

__all__ = ["evaluate_policy", "run_toy"]


def evaluate_policy(model, tokenizer, tasks: list[ToyTask], tools: list[Callable], reward_func,
                    max_completion_length: int) -> dict[str, float]:
    """Greedy multi-turn rollouts on ``tasks``: mean reward, the fraction of rollouts that called a tool
    (``tool_rate``) and the fraction whose tool results held the task's capacity document (``gold_rate``)."""
    was_training = model.training
    model.eval()
    completions = rollout_with_tools(model, tokenizer, [toy_prompt(t) for t in tasks], tools,
                                     max_new_tokens=64, max_completion_length=max_completion_length, max_turns=1)
    model.train(was_training)
    rewards = reward_func(completions=completions, answer=[t.answer for t in tasks])
    called = [any(m.get("role") == "tool" for m in c) for c in completions]
    found = [any(m.get("role") == "tool" and t.gold_doc in str(m.get("content")) for m in c)
             for c, t in zip(completions, tasks)]
    n = len(tasks)
    return {"reward": sum(rewards) / n, "tool_rate": sum(called) / n, "gold_rate": sum(found) / n}


def _quiet(trainer):
    """Drop the callback that prints every log dict (the caller reads ``state.log_history``)."""
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer


def _evaluate_with_and_without_tool(name: str, model, tokenizer, tasks, search, reward, max_len) -> tuple[dict, dict]:
    """:func:`evaluate_policy` with the search tool and with it disabled, reported as phase ``name``."""
    from icml26.progress import phase

    with phase(name, total=2) as bar:
        with_tool = evaluate_policy(model, tokenizer, tasks, [search], reward, max_len)
        bar.update()
        without = evaluate_policy(model, tokenizer, tasks, [make_toy_search(None)], reward, max_len)
        bar.update()
    return with_tool, without


def run_toy(seed: int, mode: str = "quick", device: str = "cpu", *, recipe: ToyRecipe | None = None,
            output_dir: str | None = None) -> dict[str, Any]:
    """SFT cold start, then R-GRPO with the search tool, on the fogged toy task; rewards on 50 held-out tasks.

    Returns ``reward_sft`` (SFT only), ``reward_rgrpo`` (SFT + R-GRPO), ``reward_notool`` (SFT + R-GRPO evaluated
    with the search tool disabled: it answers "No document matched"), ``reward_sft_notool``, ``reward_curve``
    (TRL's mean training reward per GRPO step), ``tool_rate_sft`` / ``tool_rate_rgrpo`` (fraction of held-out
    rollouts that searched), ``gold_rate_sft`` / ``gold_rate_rgrpo`` (fraction whose search returned the capacity
    document), ``masked_fraction`` (share of completion tokens excluded from the loss as retrieved), ``seconds``
    and each phase's seconds (``setup_s``, ``sft_s``, ``eval_sft_s``, ``grpo_s``, ``eval_rgrpo_s``).
    """
    import torch

    if mode not in MODES:
        raise input_error("run_toy", "mode", f"one of {sorted(MODES)}", mode)
    if not re.fullmatch(r"cpu|cuda(:\d+)?", str(device)):
        raise input_error("run_toy", "device", "'cpu', 'cuda' or 'cuda:N'", device)
    if str(device).startswith("cuda") and not torch.cuda.is_available():
        raise input_error("run_toy", "device", "'cpu' on a machine without a CUDA GPU", device)
    recipe = recipe or MODES[mode]
    if recipe.sft_worlds < 1 or recipe.n_sft < recipe.sft_worlds:
        raise input_error("run_toy", "recipe.sft_worlds", f"1 <= sft_worlds <= n_sft={recipe.n_sft}", recipe.sft_worlds)
    if not recipe.teacher_queries or any("{plant}" not in str(q) or not w > 0 for q, w in recipe.teacher_queries):
        raise input_error("run_toy", "recipe.teacher_queries", "non-empty (wording, weight) pairs, each wording with "
                          "a {plant} field and each weight > 0", recipe.teacher_queries)
    # The run is seeded like a script (torch's global generator), inside a fork so the caller's RNG state is
    # left as it was; the trainers' own ``set_seed`` calls stay inside the fork too.
    with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
        torch.manual_seed(seed)
        return _run_seeded(seed, device, recipe, output_dir)


def _run_seeded(seed: int, device: str, recipe: ToyRecipe, output_dir: str | None) -> dict[str, Any]:
    import tempfile

    from datasets import Dataset
    from transformers.utils import get_json_schema
    from trl import SFTConfig, SFTTrainer

    from icml26.agents.optminer.retrieval import BM25Corpus
    from icml26.progress import trainer_callback
    from icml26.tiny import tiny_model_for_tokenizer
    from icml26.training.optminer.rgrpo import RGRPOConfig, RGRPOTrainer, make_answer_reward

    start = time.perf_counter()
    rng = random.Random(seed)

    documents, capacities = make_toy_world(seed, recipe.n_plants)
    search = make_toy_search(BM25Corpus(documents), k=recipe.search_k)
    plants = sorted(capacities)
    rng.shuffle(plants)
    eval_plants, train_plants = plants[: recipe.n_eval], plants[recipe.n_eval:]
    eval_tasks = make_tasks(capacities, eval_plants, rng, recipe.n_eval)
    # SFT demonstrations from other draws of the numbers (worlds 1..sft_worlds), each with its own corpus: a plant's
    # capacity differs between demonstrations, so the cold start teaches reading the tool response, not facts.
    wordings, weights = zip(*recipe.teacher_queries)
    sft_examples = []
    for world in range(1, recipe.sft_worlds + 1):
        docs_w, caps_w = make_toy_world(seed, recipe.n_plants, world=world)
        search_w = make_toy_search(BM25Corpus(docs_w), k=recipe.search_k)
        n_w = recipe.n_sft // recipe.sft_worlds + (world <= recipe.n_sft % recipe.sft_worlds)
        for task in make_tasks(caps_w, train_plants, rng, n_w):
            sft_examples.append(scripted_trajectory(task, search_w, rng.choices(wordings, weights)[0]))
    rl_tasks = make_tasks(capacities, train_plants, rng, recipe.grpo_steps * recipe.grpo_prompts_per_step)

    tokenizer = toy_tokenizer(sft_examples, [search, make_toy_search(None)])
    model = tiny_model_for_tokenizer(tokenizer, "qwen3", hidden_size=recipe.hidden_size,
                                     num_layers=recipe.num_layers, intermediate_size=2 * recipe.hidden_size,
                                     max_position_embeddings=1024, seed=seed).to(device)
    use_cpu = device == "cpu"
    reward = make_answer_reward(tolerance=1e-4)
    workdir = output_dir or tempfile.mkdtemp(prefix="optminer-toy-")
    common = dict(report_to=[], save_strategy="no", use_cpu=use_cpu, bf16=False, seed=seed, data_seed=seed,
                  disable_tqdm=True, dataloader_num_workers=0, gradient_checkpointing=False)

    # SFT cold start on the teacher's demonstrations
    tools_json = json.dumps([get_json_schema(search)])
    sft_data = Dataset.from_list([{"messages": m, "tools": tools_json} for m in sft_examples])
    sft_args = SFTConfig(output_dir=f"{workdir}/sft", max_steps=recipe.sft_steps, learning_rate=recipe.sft_lr,
                         per_device_train_batch_size=recipe.sft_batch, assistant_only_loss=True,
                         lr_scheduler_type="constant", warmup_steps=0, logging_steps=10, max_length=1024,
                         **common)
    timings = {"setup_s": time.perf_counter() - start}
    tick = time.perf_counter()
    _quiet(SFTTrainer(model=model, args=sft_args, train_dataset=sft_data, processing_class=tokenizer,
                      callbacks=[trainer_callback("sft")])).train()
    timings["sft_s"] = time.perf_counter() - tick

    max_len = recipe.max_completion_length
    tick = time.perf_counter()
    sft_eval, sft_notool = _evaluate_with_and_without_tool("evaluation after sft", model, tokenizer, eval_tasks,
                                                           search, reward, max_len)
    timings["eval_sft_s"] = time.perf_counter() - tick

    # R-GRPO
    rl_data = Dataset.from_list([{"prompt": toy_prompt(t), "answer": t.answer, "gold_doc": t.gold_doc}
                                 for t in rl_tasks])
    batch = recipe.grpo_prompts_per_step * recipe.num_generations
    rl_args = RGRPOConfig(output_dir=f"{workdir}/rgrpo", max_steps=recipe.grpo_steps, learning_rate=recipe.grpo_lr,
                          per_device_train_batch_size=batch, num_generations=recipe.num_generations,
                          max_completion_length=max_len, max_tool_calling_iterations=1,
                          temperature=recipe.temperature, logging_steps=1, lr_scheduler_type="constant",
                          warmup_steps=0, reward_tolerance=1e-4, retrieval_bonus=recipe.retrieval_bonus, **common,
                          generation_backend="transformers" if use_cpu else "auto")
    trainer = RGRPOTrainer(model=model, args=rl_args, train_dataset=rl_data, processing_class=tokenizer,
                           tools=[search], callbacks=[trainer_callback("r-grpo")])
    _quiet(trainer)
    tick = time.perf_counter()
    trainer.train()
    timings["grpo_s"] = time.perf_counter() - tick
    history = [h for h in trainer.state.log_history if "reward" in h]
    curve = [float(h["reward"]) for h in history]
    masked = [float(h["tools/masked_fraction"]) for h in history if "tools/masked_fraction" in h]

    tick = time.perf_counter()
    rl_eval, rl_notool = _evaluate_with_and_without_tool("evaluation after r-grpo", model, tokenizer, eval_tasks,
                                                         search, reward, max_len)
    timings["eval_rgrpo_s"] = time.perf_counter() - tick
    return {
        "reward_sft": sft_eval["reward"],
        "reward_rgrpo": rl_eval["reward"],
        "reward_notool": rl_notool["reward"],
        "reward_sft_notool": sft_notool["reward"],
        "reward_curve": curve,
        "tool_rate_sft": sft_eval["tool_rate"],
        "tool_rate_rgrpo": rl_eval["tool_rate"],
        "gold_rate_sft": sft_eval["gold_rate"],
        "gold_rate_rgrpo": rl_eval["gold_rate"],
        "masked_fraction": sum(masked) / len(masked) if masked else 0.0,
        "seconds": time.perf_counter() - start,
        **timings,
    }
