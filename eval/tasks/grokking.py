"""Grokking tasks and geometry measurements for R2G (:mod:`icml26.training.r2g`).

- :func:`modular_dataset`: ``a op b mod p`` as a ``datasets.DatasetDict`` (seeded train/test split)
  whose rows feed a causal LM directly: ``input_ids = [a, b, =, c]``, ``labels`` only on ``c``,
  ``r2g_mask`` on the two operands;
- :func:`small_decoder`: a 1-layer GPT-2 built from a ``GPT2Config`` in the style of Nanda et al.
  (2023, arXiv 2301.05217): no LayerNorm, ReLU MLP, embeddings and positions
  ``N(0, d^-1/2)`` (the initialisation scale decides how fast the model memorises), the linear
  layers at PyTorch's default ``U(+-1/sqrt(fan_in))``;
- :func:`train_grokking`: a full-batch AdamW loop (the arms of the experiment) that adds the same
  :class:`~icml26.training.r2g.R2GLoss` the trainers use, or applies Grokfast-EMA;
- geometry: :func:`operand_geometry` (angular spread and norm of the operand V vectors),
  :func:`fourier_sparsity` (of the learned token embeddings), and the accuracy curves;
- :func:`tense_dataset` and friends: a synthetic tense-inflection grammar (subject-verb agreement
  across a relative clause or prepositional phrase) with an out-of-distribution split, trained
  with ``R2GSFTTrainer`` on a tiny Qwen3 (:func:`tense_trainer`).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
import torch.nn.functional as F

from icml26.errors import input_error
from icml26.utils import IGNORE_INDEX

__all__ = [
    "OPS", "fourier_sparsity", "modular_dataset", "modular_tensors", "accuracy", "operand_geometry",
    "GrokkingHistory", "small_decoder", "steps_to", "tense_accuracy", "tense_dataset", "tense_tokenize", "tense_trainer",
    "train_grokking",
]

OPS = {"add": lambda a, b, p: (a + b) % p, "mul": lambda a, b, p: (a * b) % p}


# ---------------------------------------------------------------------------------------------
# Modular arithmetic
# ---------------------------------------------------------------------------------------------
def modular_dataset(p: int = 31, op: str = "add", train_fraction: float = 0.5, seed: int = 0):
    """All ``p * p`` pairs ``(a, b)`` of ``a op b mod p``, split into train and test by ``seed``.

    Tokens ``0..p-1`` are the numbers and ``p`` is ``=``; the vocabulary has ``p + 1`` tokens.
    Columns: ``a``, ``b``, ``answer``, ``input_ids`` (``[a, b, =, answer]``), ``labels``
    (``-100`` except the answer, predicted at ``=``) and ``r2g_mask`` (the operand positions).
    """
    from datasets import Dataset, DatasetDict

    if isinstance(p, bool) or not isinstance(p, int) or p < 2:
        raise input_error("modular_dataset", "p", "an int >= 2", p)
    if op not in OPS:
        raise input_error("modular_dataset", "op", f"one of {list(OPS)}", op)
    if isinstance(train_fraction, bool) or not isinstance(train_fraction, (int, float)) or not 0.0 < train_fraction < 1.0:
        raise input_error("modular_dataset", "train_fraction", "a number in (0, 1)", train_fraction)
    pairs = [(a, b) for a in range(p) for b in range(p)]
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(seed)).tolist()
    n_train = int(round(train_fraction * len(pairs)))

    def rows(indices):
        a = [pairs[i][0] for i in indices]
        b = [pairs[i][1] for i in indices]
        c = [OPS[op](x, y, p) for x, y in zip(a, b)]
        return {"a": a, "b": b, "answer": c,
                "input_ids": [[x, y, p, z] for x, y, z in zip(a, b, c)],
                "labels": [[IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX, z] for z in c],
                "r2g_mask": [[1, 1, 0, 0]] * len(c)}

    return DatasetDict(train=Dataset.from_dict(rows(order[:n_train])), test=Dataset.from_dict(rows(order[n_train:])))


def modular_tensors(dataset, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``([N, 3] prompts a b =, [N] answers)`` of a :func:`modular_dataset` split."""
    ids = torch.tensor(dataset["input_ids"], device=device)
    return ids[:, :3].contiguous(), ids[:, 3].contiguous()


def small_decoder(p: int = 31, *, d_model: int = 64, n_heads: int = 4, d_mlp: int = 256, n_layers: int = 1,
                  layer_norm: bool = False, initializer_range: float | None = None, seed: int = 0):
    """A GPT-2 decoder for ``p + 1`` tokens and sequences of up to 4, in the style of Nanda et al.

    Token and position embeddings are drawn from ``N(0, d^-1/2)``. The linear
    layers get PyTorch's default ``U(+-1/sqrt(fan_in))`` (the scale of the progress-measures
    model) when ``initializer_range`` is None, else GPT-2's ``N(0, initializer_range)``.
    ``layer_norm=False`` (default) replaces the LayerNorms by identities, as in the
    progress-measures model; such a model lives in memory (``save_pretrained`` would reload the
    LayerNorms). Dropout is off and the unembedding is untied.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=p + 1, n_positions=4, n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                        n_inner=d_mlp, activation_function="relu", resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, tie_word_embeddings=False, initializer_range=initializer_range or 0.02,
                        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    config._attn_implementation = "eager"  # the fastest for 3-token sequences on CPU
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
        with torch.no_grad():
            model.transformer.wte.weight.normal_(0.0, d_model ** -0.5)
            model.transformer.wpe.weight.normal_(0.0, d_model ** -0.5)
            for module in model.modules() if initializer_range is None else ():
                if type(module).__name__ == "Conv1D" or isinstance(module, torch.nn.Linear):
                    # Conv1D stores [in, out], Linear [out, in]
                    fan_in = module.weight.shape[0 if type(module).__name__ == "Conv1D" else 1]
                    module.weight.uniform_(-fan_in ** -0.5, fan_in ** -0.5)
                    if getattr(module, "bias", None) is not None:
                        module.bias.uniform_(-fan_in ** -0.5, fan_in ** -0.5)
    if not layer_norm:
        for block in model.transformer.h:
            block.ln_1, block.ln_2 = torch.nn.Identity(), torch.nn.Identity()
        model.transformer.ln_f = torch.nn.Identity()
    return model


@torch.no_grad()
def accuracy(model, inputs: torch.Tensor, answers: torch.Tensor) -> float:
    """Share of prompts whose argmax at ``=`` is the answer."""
    logits = model(input_ids=inputs, logits_to_keep=1).logits[:, -1]
    return float((logits.argmax(-1) == answers).float().mean())


@torch.no_grad()
def operand_geometry(model, p: int, positions: Sequence[int] = (0, 1)) -> dict[str, float]:
    """Angular spread and norm of the V vectors of the ``p`` operand tokens (first hooked layer).

    Feeds ``[a, a, =]`` for every ``a`` and reads the value projection at the operand positions:
    ``angular_dist`` is the mean pairwise cosine distance between the ``p`` operands (averaged over
    the positions), ``v_norm`` their mean L2 norm.
    """
    from icml26.training.r2g import R2GLoss, value_geometry

    device = next(model.parameters()).device
    a = torch.arange(p, device=device)
    prompts = torch.stack([a, a, torch.full_like(a, p)], dim=1)
    with R2GLoss(model, layers=[0], alpha=0.0, track_stats=False) as hooks:
        model(input_ids=prompts, logits_to_keep=1)
        mask = torch.zeros(3, dtype=torch.bool, device=device)
        mask[list(positions)] = True
        return value_geometry(hooks.values[0], mask)


@torch.no_grad()
def fourier_sparsity(embedding: torch.Tensor, p: int | None = None) -> dict[str, float]:
    """How concentrated the token embeddings ``[p, d]`` are on a few Fourier frequencies.

    The power of each frequency ``k = 1..p//2`` is ``sum_d |DFT_a(E)[k, d]|^2`` (the constant
    ``k = 0`` left out). ``gini`` is the Gini coefficient of that spectrum (0: flat, towards 1:
    a few frequencies, the grokked "clock" of Nanda et al.); ``top_fraction`` is the share of the
    power in the top ``max(1, n_freq // 5)`` frequencies.
    """
    E = embedding.detach().float()[: p if p is not None else embedding.shape[0]]
    power = torch.fft.rfft(E - E.mean(0), dim=0).abs().pow(2).sum(-1)[1:]
    share = power / power.sum().clamp_min(1e-30)
    s, _ = torch.sort(share)
    n = s.numel()
    gini = float(((2 * torch.arange(1, n + 1, dtype=s.dtype, device=s.device) - n - 1) * s).sum() / n)
    top = max(1, n // 5)
    return {"gini": gini, "top_fraction": float(s[-top:].sum())}


def steps_to(steps: Sequence[int], values: Sequence[float], threshold: float = 0.95) -> int | None:
    """The first step whose value reaches ``threshold`` (None if none does)."""
    return next((s for s, v in zip(steps, values) if v >= threshold), None)


@dataclass
class GrokkingHistory:
    """What :func:`train_grokking` measured, one list entry per measurement (step 0 first).

    ``r2g_term`` is the ``1 / D`` the run would pay (logged for every arm, NaN at step 0);
    ``angular_dist`` and ``v_norm`` come from :func:`operand_geometry`, ``fourier_gini`` from
    :func:`fourier_sparsity`; ``seconds`` is the wall time of the whole run.
    """

    step: list[int] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    test_acc: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    r2g_term: list[float] = field(default_factory=list)
    angular_dist: list[float] = field(default_factory=list)
    v_norm: list[float] = field(default_factory=list)
    fourier_gini: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def curves(self) -> dict[str, list]:
        """The measured lists by name (everything but ``seconds``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "seconds"}

    def at(self, key: str, step: int) -> Any:
        """``key`` at the last measurement at or before ``step``."""
        index = max(i for i, s in enumerate(self.step) if s <= step)
        return getattr(self, key)[index]

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def train_grokking(model, data, *, steps: int, r2g: dict[str, Any] | None = None,
                   grokfast: dict[str, float] | None = None, lr: float = 1e-3, weight_decay: float = 1.0,
                   betas: tuple[float, float] = (0.9, 0.98), eval_every: int = 50, stop_at: float | None = None,
                   min_steps: int = 0, seed: int = 0, device: str | torch.device = "cpu",
                   phase_name: str = "train_grokking") -> GrokkingHistory:
    """Full-batch AdamW on a :func:`modular_dataset`, with optional R2G or Grokfast-EMA.

    Args:
        model: e.g. :func:`small_decoder`; trained in place on ``device``.
        data: the ``DatasetDict`` (``train`` and ``test``).
        steps: optimizer steps (one per epoch: the batch is the whole training set).
        r2g: keyword arguments of :class:`~icml26.training.r2g.R2GLoss` (``alpha``, ``distance``,
            ...; ``positions`` defaults to the operands); None for plain cross-entropy.
        grokfast: keyword arguments of :class:`~icml26.training.grokfast.GrokfastEMA`, or None.
        eval_every: steps between measurements (accuracies, geometry, Fourier sparsity).
        stop_at: stop once test accuracy reaches this, but not before ``min_steps``.
        seed: seeds the pairing of the R2G term (a local generator; the model is seeded by its builder).
        phase_name: the :func:`icml26.progress.phase` that reports the steps.

    Returns a :class:`GrokkingHistory`.
    """
    from icml26.progress import phase
    from icml26.training.grokfast import GrokfastEMA
    from icml26.training.r2g import R2GLoss, random_pairing

    device = torch.device(device)
    model.to(device).train()
    x_train, y_train = modular_tensors(data["train"], device)
    x_test, y_test = modular_tensors(data["test"], device)
    p = int(x_train[0, 2])
    settings = {"alpha": 0.0, "positions": [0, 1], **(r2g or {})}
    hooks = R2GLoss(model, **settings)
    filt = GrokfastEMA(**grokfast) if grokfast else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=betas)
    history = GrokkingHistory()
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()

    def measure(step: int, loss: float) -> float:
        model.eval()
        test_acc = accuracy(model, x_test, y_test)
        geometry = operand_geometry(model, p)
        stats = hooks.pop_stats()
        for key, value in (("step", step), ("train_acc", accuracy(model, x_train, y_train)),
                           ("test_acc", test_acc), ("train_loss", loss), ("r2g_term", stats.get("term", math.nan)),
                           ("angular_dist", geometry["angular_dist"]), ("v_norm", geometry["v_norm"]),
                           ("fourier_gini", fourier_sparsity(model.transformer.wte.weight, p)["gini"])):
            getattr(history, key).append(value)
        model.train()
        return test_acc

    try:
        measure(0, math.nan)
        with phase(phase_name, total=steps) as bar:
            for step in range(1, steps + 1):
                logits = model(input_ids=x_train, logits_to_keep=1).logits[:, -1]
                loss = F.cross_entropy(logits.float(), y_train)
                perm = random_pairing(x_train.shape[0], generator=generator, device=device) if hooks.alpha > 0 else None
                total = loss + hooks(perm=perm)
                hooks.clear()
                optimizer.zero_grad(set_to_none=True)
                total.backward()
                if filt is not None:
                    filt(model)
                optimizer.step()
                bar.update()
                if step % eval_every == 0 or step == steps:
                    test_acc = measure(step, float(loss.detach()))
                    if stop_at is not None and test_acc >= stop_at and step >= min_steps:
                        break
    finally:
        hooks.remove()
    history.seconds = time.perf_counter() - start
    return history


# ---------------------------------------------------------------------------------------------
# Tense inflection (a small language task)
# ---------------------------------------------------------------------------------------------
NOUNS = (("dog", "dogs"), ("cat", "cats"), ("bird", "birds"), ("horse", "horses"), ("man", "men"),
         ("woman", "women"), ("child", "children"), ("teacher", "teachers"))
INTRANSITIVE = (("walked", "walks", "walk"), ("slept", "sleeps", "sleep"), ("smiled", "smiles", "smile"),
                ("ran", "runs", "run"), ("laughed", "laughs", "laugh"), ("waited", "waits", "wait"))
TRANSITIVE = (("saw", "sees", "see"), ("liked", "likes", "like"), ("followed", "follows", "follow"),
              ("helped", "helps", "help"))
TENSE_PROMPT_SUFFIX = " =>"


def _sentence(rng: random.Random, attractor: bool | None) -> dict[str, str]:
    """One past-tense sentence and its present-tense form.

    ``attractor=None``: no modifier; ``False``: a modifier whose noun has the subject's number;
    ``True``: a modifier whose noun has the other number (only the hierarchical rule is right).
    """
    n1 = rng.randrange(2)
    subject = rng.choice(NOUNS)[n1]
    verb = rng.choice(INTRANSITIVE)
    words_past, words_present = ["the", subject], ["the", subject]
    if attractor is not None:
        n2 = 1 - n1 if attractor else n1
        noun2 = rng.choice(NOUNS)[n2]
        if rng.random() < 0.5:
            rc = rng.choice(TRANSITIVE)
            words_past += ["that", "the", noun2, rc[0]]
            words_present += ["that", "the", noun2, rc[1 + n2]]
        else:
            words_past += ["near", "the", noun2]
            words_present += ["near", "the", noun2]
    words_past += [verb[0], "."]
    words_present += [verb[1 + n1], "."]
    return {"prompt": " ".join(words_past) + TENSE_PROMPT_SUFFIX, "completion": " " + " ".join(words_present)}


def tense_dataset(n_train: int = 2000, n_val: int = 200, n_ood: int = 200, seed: int = 0):
    """Past -> present tense inflection; ``ood`` sentences put an attractor between subject and verb.

    ``train`` and ``validation`` hold sentences without a modifier or with a modifier that agrees
    in number with the subject, so "agree with the nearest noun" and "agree with the subject"
    both fit them; ``ood`` holds the disagreeing modifiers, where only the subject rule is right.
    Columns ``prompt`` and ``completion`` (TRL's prompt-completion format).
    """
    from datasets import Dataset, DatasetDict

    rng = random.Random(seed)
    in_dist = lambda n: [_sentence(rng, rng.choice([None, False])) for _ in range(n)]  # noqa: E731
    ood = [_sentence(rng, True) for _ in range(n_ood)]
    return DatasetDict(train=Dataset.from_list(in_dist(n_train)), validation=Dataset.from_list(in_dist(n_val)),
                       ood=Dataset.from_list(ood))


def tense_tokenize(dataset, tokenizer, *, r2g_positions: int = 5):
    """Pre-tokenise prompt-completion rows: ``input_ids``, ``labels`` (completion and EOS only) and
    ``r2g_mask`` on the first ``r2g_positions`` tokens (positions 0-4, as in the authors' tense code)."""
    eos = tokenizer.eos_token_id

    def encode(example):
        prompt = tokenizer(example["prompt"], add_special_tokens=False)["input_ids"]
        completion = tokenizer(example["completion"], add_special_tokens=False)["input_ids"] + [eos]
        ids = prompt + completion
        return {"input_ids": ids, "labels": [IGNORE_INDEX] * len(prompt) + completion,
                "r2g_mask": [int(i < r2g_positions) for i in range(len(ids))]}

    return dataset.map(encode, remove_columns=[c for c in dataset.column_names if c not in ("prompt", "completion")])


@torch.no_grad()
def tense_accuracy(model, dataset, *, batch_size: int = 128, pad_token_id: int = 0) -> dict[str, float]:
    """Teacher-forced accuracy on a :func:`tense_tokenize` split: ``exact_match`` (every completion
    token is the argmax) and ``token_accuracy``."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    exact, correct, total = 0, 0, 0
    for start in range(0, len(dataset), batch_size):
        rows = dataset[start:start + batch_size]
        length = max(len(ids) for ids in rows["input_ids"])
        ids = torch.full((len(rows["input_ids"]), length), pad_token_id, dtype=torch.long)
        labels = torch.full_like(ids, IGNORE_INDEX)
        attention = torch.zeros_like(ids)
        for i, (x, y) in enumerate(zip(rows["input_ids"], rows["labels"])):
            ids[i, : len(x)], labels[i, : len(y)], attention[i, : len(x)] = torch.tensor(x), torch.tensor(y), 1
        logits = model(input_ids=ids.to(device), attention_mask=attention.to(device)).logits[:, :-1]
        target = labels[:, 1:].to(device)
        scored = target != IGNORE_INDEX
        hit = (logits.argmax(-1) == target) & scored
        correct += int(hit.sum())
        total += int(scored.sum())
        exact += int((hit | ~scored).all(1).sum())
    model.train(was_training)
    return {"exact_match": exact / max(1, len(dataset)), "token_accuracy": correct / max(1, total)}


def tense_trainer(model, tokenizer, train_dataset, *, output_dir, max_steps: int = 20, r2g_alpha: float = 0.08,
                  distance: str = "euclidean", learning_rate: float = 1e-3, batch_size: int = 8,
                  logging_steps: int = 5, seed: int = 0, **sft_kwargs):
    """An ``R2GSFTTrainer`` for a :func:`tense_tokenize` dataset (the authors' tense-inflection recipe,
    shortened: AdamW eps 1e-7, no weight decay, clipping 1.0, batch 8, linear warm-up over 10% of the
    steps where theirs warms up over 10k of 1M steps)."""
    from icml26.training.r2g_trainer import R2GSFTConfig, R2GSFTTrainer

    args = R2GSFTConfig(output_dir=str(output_dir), max_steps=max_steps, per_device_train_batch_size=batch_size,
                        learning_rate=learning_rate, adam_epsilon=1e-7, weight_decay=0.0, max_grad_norm=1.0,
                        warmup_steps=max(1, max_steps // 10), lr_scheduler_type="linear",
                        logging_steps=logging_steps, save_strategy="no", report_to=[], seed=seed,
                        disable_tqdm=True, use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0,
                        r2g_alpha=r2g_alpha, r2g_distance=distance,
                        **{"bf16": False, "activation_checkpointing": False, **sft_kwargs})
    return R2GSFTTrainer(model=model, args=args, train_dataset=train_dataset, processing_class=tokenizer)
