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

Pipeline (:func:`icml26.training.optminer.run_toy`): a tiny Qwen3 from config; an SFT cold start with TRL's ``SFTTrainer`` on the scripted
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

import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from icml26.errors import InputTypeError, described, input_error
from icml26.validation import check_finite, check_int

__all__ = [
    "COMPACT_TOOL_TEMPLATE", "MODES", "SYSTEM_PROMPT", "TEACHER_QUERIES", "ToyRecipe", "ToyTask",
    "make_tasks", "make_toy_search", "make_toy_world", "scripted_trajectory", "toy_prompt",
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

    def __post_init__(self) -> None:
        fn = "ToyRecipe"
        for name in ("n_plants", "n_eval", "n_sft", "sft_worlds", "sft_steps", "sft_batch", "grpo_steps",
                     "grpo_prompts_per_step", "max_completion_length", "hidden_size", "num_layers", "search_k"):
            check_int(fn, name, getattr(self, name), low=1)
        check_int(fn, "num_generations", self.num_generations, low=2)  # GRPO compares completions within a group
        for name in ("sft_lr", "grpo_lr", "temperature"):
            check_finite(fn, name, getattr(self, name), positive=True)
        check_finite(fn, "retrieval_bonus", self.retrieval_bonus, non_negative=True)


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

    n_plants = check_int("make_toy_world", "n_plants", n_plants, low=1)
    world = check_int("make_toy_world", "world", world, low=0)
    if isinstance(seed, bool) or not isinstance(seed, (int, str)):
        raise InputTypeError("make_toy_world", "seed", "an int", described(repr(seed)))
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
    n = check_int("make_tasks", "n", n, low=0)
    if isinstance(plants, str) or not plants:
        raise input_error("make_tasks", "plants", "a non-empty list of plant codes", plants)
    unknown = [p for p in plants if p not in capacities]
    if unknown:
        raise input_error("make_tasks", "plants", "plants of the world's capacities",
                          described(f"plants without a capacity {unknown[:5]}"))
    if not isinstance(rng, random.Random):
        raise InputTypeError("make_tasks", "rng", "a random.Random", described(type(rng).__name__))
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


def make_toy_search(corpus, k: int = 3) -> Callable[[str], str]:
    """``search(query) -> str`` over ``corpus`` (``corpus=None``: the disabled tool, which never finds anything).

    The same formatting as ``icml26.agents.optminer.retrieval.make_search_tool``, with a one-line description:
    the tool schema is rendered into every prompt, and a tiny model pays for each token of it.
    """
    from icml26.agents.optminer.retrieval import format_documents

    k = check_int("make_toy_search", "k", k, low=1)
    if corpus is not None and not callable(getattr(corpus, "search", None)):
        raise InputTypeError("make_toy_search", "corpus", "a corpus with a .search(query, k) method, or None",
                             described(type(corpus).__name__))

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


