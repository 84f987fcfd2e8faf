"""The R-GRPO toy task: a fogged constant that only the right search reveals.

Reconstruction: our toy for Opt-Miner's R-GRPO stage (ICML 2026 poster 65154; only the abstract is public).

Each task names a plant ("Shifts: ten. How many units does plant K73 make?"). The plant's capacity per shift was
*fogged* out of the question into a document of a BM25-searched corpus ("Plant K73 makes 37 units per shift."),
next to a distractor with the same plant code and another number ("Plant K73 employs 52 workers."). The answer is
``capacity * shifts`` with ``shifts`` in {one, ten, hundred}: the multiplication appends zeros, so a 2-layer model
computes it token by token. Held-out tasks use plants never seen in training, so the constant cannot be memorised:
without the tool a policy can only guess.

The tokenizer is word-level (:func:`icml26.tiny.build_word_tokenizer`, a choice of this toy): a digit or a letter
is the same id in the question, the query, the document and the answer, and every prompt has the same length, so
copying the plant code into the query and the number into the answer is a fixed-offset copy.

Pipeline (:func:`run_toy`): a tiny Qwen3 from config; an SFT cold start with TRL's ``SFTTrainer`` on the scripted
teacher's trajectories (``<think>`` - a ``search`` tool call - the real tool response - ``<answer>``); then
:class:`~icml26.training.optminer.RGRPOTrainer` (TRL ``GRPOTrainer(tools=[search])``, retrieved tokens out of the
loss). The teacher searches well only 40% of the time (:data:`TEACHER_QUERIES`): otherwise it asks for the staff
document and answers with the number it read there. SFT learns to copy codes and numbers, and the teacher's habit of
asking for the wrong document; R-GRPO has to learn from the reward which search pays. That is the information-seeking
behaviour the paper trains, reduced to one choice. With a teacher that always searches well, SFT alone reaches 0.94
held out (seed 0, 1000 steps) and leaves R-GRPO nothing to improve.

Rewards are measured on 50 held-out tasks with greedy multi-turn rollouts for: the SFT policy, the SFT + R-GRPO
policy, and the SFT + R-GRPO policy with the tool disabled (the search returns no document). The ablation disables
the tool at evaluation rather than training a second policy without it: it isolates how much of the reward depends
on the retrieved constant, and costs no second training run.

The SFT demonstrations come from other draws of the numbers (``sft_worlds`` worlds with the same plants), so the
cold start cannot memorise a plant's capacity and only reading the tool response pays; GRPO and the evaluation use
world 0, with held-out plants for the evaluation.

Cost: the tokenizer gets :data:`COMPACT_TOOL_TEMPLATE` (a one-line tool header instead of Qwen's JSON signatures and
instructions), so a trajectory is about 180 tokens. On 2 CPU cores a seed takes about 2-2.5 minutes, three quarters
of it SFT; ``run_toy`` reports each phase's seconds. Training runs in float32: TRL's configs default to bf16, which
on a CPU without bf16 matrix units made every step about 3 times slower.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from icml26.errors import input_error

__all__ = [
    "COMPACT_TOOL_TEMPLATE", "MODES", "SYSTEM_PROMPT", "TEACHER_QUERIES", "ToyRecipe", "ToyTask",
    "evaluate_policy", "make_toy_search", "make_toy_world", "run_toy", "scripted_trajectory", "toy_prompt",
    "toy_tokenizer",
]

SYSTEM_PROMPT = "Find plant facts with search. Reply <answer>number</answer>."

#: The toy's chat template: TRL's Qwen2.5 *training* template (prefix-preserving, ``{% generation %}`` markers for
#: assistant-only loss, hermes ``<tool_call>`` blocks that the tokenizer's Qwen response template parses back) with
#: a one-line tool header instead of Qwen's JSON signatures and instructions. Qwen's header costs about 350 of the
#: 600 tokens of a toy trajectory with the tiny tokenizer; a tiny model learns nothing from it, and every SFT step,
#: GRPO rollout and evaluation pays for it. Users' own models keep their own templates.
COMPACT_TOOL_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.' }}{%- endif %}"
    "{%- if tools %}{{- '\\nTools:' }}{%- for tool in tools %}"
    "{%- set fn = tool.function if tool.function is defined else tool %}"
    "{{- ' ' + fn.name + '(' + (fn.parameters.properties | list | join(', ')) + ')' }}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- elif message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- generation %}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls or [] %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' }}"
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endgeneration %}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
SHIFTS = (1, 10, 100)
#: Shifts are written as one word each, so that every question has the same number of tokens.
SHIFT_WORDS = {1: "one", 10: "ten", 100: "hundred"}
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


#: The wordings of the scripted teacher's search queries and how often it uses each (see :class:`ToyRecipe`). Only
#: ``capacity of plant X`` ranks the capacity document first; ``staff of plant X`` finds the staff document.
TEACHER_QUERIES: tuple[tuple[str, float], ...] = (("staff of plant {plant}", 0.6), ("capacity of plant {plant}", 0.4))


@dataclass(frozen=True)
class ToyRecipe:
    """Sizes and hyper-parameters of one :func:`run_toy` mode.

    ``teacher_queries`` is the cold start's weak point on purpose: the scripted teacher searches with a mix of
    wordings (:data:`TEACHER_QUERIES`), and then answers with the number it read. SFT imitates the mix, so its greedy
    policy searches with the teacher's most frequent wording, which finds the staff document; which search pays is
    left for R-GRPO to learn. With a teacher that always searches well (``teacher_queries=(("capacity of plant
    {plant}", 1.0),)``) SFT alone reaches 0.94 held out at seed 0 after 1000 steps of 16.

    ``retrieval_bonus`` (R-GRPO's optional bonus when a tool result holds the gold document) stays off, as in
    :class:`~icml26.training.optminer.RGRPOConfig`: the answer reward alone moves the search. With 0.5 the held-out
    rewards after R-GRPO were the same at seeds 0 and 1 (0.92) and 0.14 instead of 0.10 at seed 2. On an earlier
    cold start (600 SFT steps, three wordings, the right one sampled in about 10% of rollouts), ``grpo_lr`` 1e-4 had
    not moved the search after 30 steps, and 1e-3 made the policy stop calling the tool.
    """

    n_plants: int = 160
    n_eval: int = 50
    n_sft: int = 800
    sft_worlds: int = 8
    teacher_queries: tuple[tuple[str, float], ...] = TEACHER_QUERIES
    sft_steps: int = 1000
    sft_lr: float = 5e-3
    sft_batch: int = 16
    grpo_steps: int = 30
    grpo_lr: float = 3e-4
    retrieval_bonus: float = 0.0
    grpo_prompts_per_step: int = 8
    num_generations: int = 8
    temperature: float = 1.0
    max_completion_length: int = 256
    hidden_size: int = 64
    num_layers: int = 2
    search_k: int = 1


#: ``full`` runs the same recipe as ``quick`` (the toy's sizes are fixed); the experiment's full mode runs it
#: over three seeds.
MODES: dict[str, ToyRecipe] = {"quick": ToyRecipe(), "full": ToyRecipe()}


def _plant_codes(n: int, rng: random.Random) -> list[str]:
    codes = sorted({f"{letter}{number}" for letter in _LETTERS for number in range(10, 100)})  # 3 tokens each
    if n > len(codes):
        raise input_error("make_toy_world", "n_plants", f"at most {len(codes)}", n)
    return rng.sample(codes, n)


def make_toy_world(seed: int, n_plants: int = 160, world: int = 0) -> tuple[list, dict[str, int]]:
    """The corpus and the hidden constants: ``(documents, {plant: capacity})``.

    Per plant a capacity document (the fogged fact) and a staff document (same plant code, another number);
    capacities are two-digit numbers not ending in 0 (the tiny tokenizer merges "00"). The plant codes depend on
    ``seed`` only; ``world`` redraws every number for the same plants (world 0 is the one evaluated and trained on
    with GRPO; the SFT demonstrations come from other worlds, so that a plant's capacity cannot be memorised from
    them and only reading the tool response pays).
    """
    from icml26.agents.optminer.retrieval import Document

    rng = random.Random(seed)
    codes = _plant_codes(n_plants, rng)
    if world:
        rng = random.Random(f"{seed}/{world}")
    capacities = {code: rng.choice([c for c in range(11, 100) if c % 10]) for code in codes}
    documents = []
    for code, capacity in capacities.items():
        documents.append(Document(f"{code}-cap", f"Plant {code} capacity",
                                  f"Plant {code} makes {capacity} units per shift."))
        documents.append(Document(f"{code}-staff", f"Plant {code} staff",
                                  f"Plant {code} employs {rng.choice([n for n in range(11, 100) if n != capacity])} "
                                  "workers."))
    return documents, capacities


def make_tasks(capacities: dict[str, int], plants: list[str], rng: random.Random, n: int) -> list[ToyTask]:
    """``n`` tasks over ``plants`` (cycled, shuffled), each with a random number of shifts."""
    tasks = []
    for i in range(n):
        plant = plants[i % len(plants)]
        shifts = rng.choice(SHIFTS)
        question = f"Shifts: {SHIFT_WORDS[shifts]}. How many units does plant {plant} make?"
        tasks.append(ToyTask(plant, capacities[plant], shifts, question, float(capacities[plant] * shifts),
                             f"[{plant}-cap]"))
    rng.shuffle(tasks)
    return tasks


def toy_prompt(task: ToyTask) -> list[dict]:
    """The chat prompt of a task (system + user turns)."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.question}]


def scripted_trajectory(task: ToyTask, search: Callable[[str], str],
                        query: str = "capacity of plant {plant}") -> list[dict]:
    """The teacher's demonstration: think, call ``search`` with ``query`` (``{plant}`` filled in), read the real
    tool response, and answer with the first number of the top document times the shifts (the right answer when
    the search found the capacity document)."""
    query = query.format(plant=task.plant)
    response = search(query)
    read = re.search(r"(?:makes|employs) (\d+)", response)
    answer = int(read.group(1)) * task.shifts if read else 0
    return [
        *toy_prompt(task),
        {"role": "assistant", "content": f"<think>plant {task.plant}</think>",
         "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": query}}}]},
        {"role": "tool", "name": "search", "content": response},
        {"role": "assistant", "content": f"<answer>{answer}</answer>"},
    ]


def evaluate_policy(model, tokenizer, tasks: list[ToyTask], tools: list[Callable], reward_func,
                    max_completion_length: int) -> dict[str, float]:
    """Greedy multi-turn rollouts on ``tasks``: mean reward, the fraction of rollouts that called a tool
    (``tool_rate``) and the fraction whose tool results held the task's capacity document (``gold_rate``)."""
    from icml26.training.optminer import rollout_with_tools

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


def toy_tokenizer(trajectories: list[list[dict]], tools: list[Callable]):
    """The toy's word-level tokenizer (:func:`icml26.tiny.build_word_tokenizer`, a choice of
    this toy), its vocabulary read from ``trajectories`` rendered with :data:`COMPACT_TOOL_TEMPLATE`, plus
    every letter and digit: plant codes, numbers and the tool's answers are then spelt with the same
    ids wherever they appear, which byte-level BPE did not do (``" 4","2"`` in a document but ``"4","2"``
    in the answer), and copying them is what the policy has to learn.
    """
    from transformers.utils import get_json_schema

    from icml26.tiny import build_word_tokenizer

    schemas = [get_json_schema(tool) for tool in tools]
    seed_texts = [SYSTEM_PROMPT, COMPACT_TOOL_TEMPLATE, *(tool("") for tool in tools)]
    draft = build_word_tokenizer(seed_texts, chat_template=COMPACT_TOOL_TEMPLATE)
    rendered = [draft.apply_chat_template(t, tools=schemas, tokenize=False) for t in trajectories]
    return build_word_tokenizer(seed_texts + rendered, chat_template=COMPACT_TOOL_TEMPLATE)


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
    from icml26.training.optminer import RGRPOConfig, RGRPOTrainer, make_answer_reward

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
