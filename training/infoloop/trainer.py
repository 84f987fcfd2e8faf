"""The synthetic data loop on a causal language model: generate, verify, and TRL's ``SFTTrainer`` on what was kept,
per round ("An Information-Theoretic Criterion for Efficient Data Synthesis", ICML 2026, arXiv 2605.16379;
reconstruction: the paper has no code).

:class:`CausalLMGenerator` makes a model a loop generator (``fit`` = supervised fine-tuning on prompt-completion
pairs, ``sample`` = sampled completions for a pool of prompts), so :class:`~icml26.training.infoloop.SyntheticLoop`
and every policy and verifier of :mod:`icml26.training.infoloop.loop` apply unchanged; samples are pairs of object
arrays ``(prompts, completions)``. :class:`SyntheticLoopTrainer` is the TRL-style face: a
:class:`SyntheticLoopConfig` (an ``SFTConfig``) names the rounds, the samples per prompt and the verifier, and the
user gives the correctness function the verifier alone may call.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from trl import SFTConfig, SFTTrainer

from icml26.errors import describe, input_error
from icml26.training.infoloop.loop import ExactVerifier, LoopHistory, NoisyVerifier, Replace, SyntheticLoop, Verify
from icml26.validation import check_choice, check_finite, check_int

VERIFIERS = ("none", "exact", "noisy")


@dataclass
class SyntheticLoopConfig(SFTConfig):
    """``SFTConfig`` (each round's fine-tuning) plus the loop."""

    loop_rounds: int = field(default=3, metadata={"help": "Rounds of generate, verify, fine-tune after round 0."})
    samples_per_prompt: int = field(default=1, metadata={"help": "Completions sampled per prompt each round."})
    loop_max_new_tokens: int = field(default=8, metadata={"help": "Tokens generated per completion."})
    loop_temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the generation."})
    loop_verifier: str = field(default="exact", metadata={
        "help": "'none' (a closed loop: keep every sample), 'exact' or 'noisy' (verdicts flipped with "
                "loop_verifier_eta)."})
    loop_verifier_eta: float = field(default=0.2, metadata={"help": "Flip probability of the noisy verifier."})

    def __post_init__(self) -> None:
        fn = "SyntheticLoopConfig"
        self.loop_rounds = check_int(fn, "loop_rounds", self.loop_rounds, low=1)
        self.samples_per_prompt = check_int(fn, "samples_per_prompt", self.samples_per_prompt, low=1)
        self.loop_max_new_tokens = check_int(fn, "loop_max_new_tokens", self.loop_max_new_tokens, low=1)
        self.loop_temperature = check_finite(fn, "loop_temperature", self.loop_temperature, positive=True)
        self.loop_verifier = check_choice(fn, "loop_verifier", self.loop_verifier, VERIFIERS)
        self.loop_verifier_eta = check_finite(fn, "loop_verifier_eta", self.loop_verifier_eta, low=0.0, high=1.0)
        super().__post_init__()


class CausalLMGenerator:
    """A causal LM as a loop generator.

    Args:
        model: a ``transformers`` causal LM (trained in place).
        tokenizer: its tokenizer (left padding is used for generation).
        args: the ``SFTConfig`` of each fit (its ``output_dir`` gets a ``round-<k>`` folder per fit).
        prompts: the pool of prompts the loop completes.
        samples_per_prompt: completions per prompt per round.
        max_new_tokens: tokens per completion.
        temperature: sampling temperature.
        batch_size: prompts per ``generate`` call.
        quiet: drop the trainers' progress and log printing (for loops inside a larger run).
    """

    def __init__(self, model, tokenizer, args: SFTConfig, prompts, samples_per_prompt: int = 1,
                 max_new_tokens: int = 8, temperature: float = 1.0, batch_size: int = 64, quiet: bool = False) -> None:
        prompts = list(prompts)
        if not prompts or not all(isinstance(p, str) and p for p in prompts):
            raise input_error("CausalLMGenerator", "prompts", "a non-empty list of non-empty strings", describe(prompts))
        self.model, self.tokenizer, self.args = model, tokenizer, args
        self.prompts = prompts
        self.samples_per_prompt = check_int("CausalLMGenerator", "samples_per_prompt", samples_per_prompt, low=1)
        self.max_new_tokens = check_int("CausalLMGenerator", "max_new_tokens", max_new_tokens, low=1)
        self.temperature = check_finite("CausalLMGenerator", "temperature", temperature, positive=True)
        self.batch_size = check_int("CausalLMGenerator", "batch_size", batch_size, low=1)
        self.fits = 0
        self.quiet = bool(quiet)

    def __deepcopy__(self, memo):
        raise input_error("CausalLMGenerator", "copy", "no deep copy (a trained transformers model keeps forward "
                          "wrappers bound to the original, so a copy would train weights its forward never reads): "
                          "run SyntheticLoop with copy_generator=False, or build a fresh model and load the state dict",
                          "copy.deepcopy")

    def fit(self, data) -> CausalLMGenerator:
        """Fine-tune on ``(prompts, completions)`` (completion-only loss, TRL's prompt-completion format)."""
        from datasets import Dataset

        if not isinstance(data, tuple) or len(data) != 2 or len(data[0]) != len(data[1]) or len(data[0]) == 0:
            raise input_error("CausalLMGenerator.fit", "data", "a pair (prompts, completions) of equal non-zero "
                              "length", describe(data))
        args = copy.copy(self.args)
        args.output_dir = f"{self.args.output_dir}/round-{self.fits}"
        dataset = Dataset.from_dict({"prompt": [str(p) for p in data[0]], "completion": [str(c) for c in data[1]]})
        trainer = SFTTrainer(model=self.model, args=args, train_dataset=dataset, processing_class=self.tokenizer)
        if self.quiet:
            from transformers.trainer_callback import PrinterCallback, ProgressCallback

            trainer.remove_callback(PrinterCallback)
            trainer.remove_callback(ProgressCallback)
        trainer.train()
        self.fits += 1
        return self

    def sample(self, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
        """``samples_per_prompt`` completions of every pool prompt (``n`` is ignored: the pool fixes the count)."""
        rng = np.random.default_rng(rng)
        prompts = [p for p in self.prompts for _ in range(self.samples_per_prompt)]
        completions = []
        tok = self.tokenizer
        side = tok.padding_side
        tok.padding_side = "left"
        self.model.eval()
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(int(rng.integers(2**31)))
                for i in range(0, len(prompts), self.batch_size):
                    batch = tok(prompts[i:i + self.batch_size], return_tensors="pt", padding=True,
                                add_special_tokens=False).to(self.model.device)
                    out = self.model.generate(**batch, do_sample=True, temperature=self.temperature, top_k=0,
                                              max_new_tokens=self.max_new_tokens, pad_token_id=tok.pad_token_id,
                                              eos_token_id=tok.eos_token_id)
                    completions += tok.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        finally:
            tok.padding_side = side
        return np.array(prompts, dtype=object), np.array([c.strip() for c in completions], dtype=object)


class SyntheticLoopTrainer:
    """Round 0 fine-tunes on ``train_dataset``'s real pairs (``None``: the model as given is round 0); each later round samples completions for ``prompts``,
    keeps what the configured verifier accepts (``correct`` is the only place truth lives) and fine-tunes on them.

    Args:
        model: a ``transformers`` causal LM.
        args: a :class:`SyntheticLoopConfig`.
        processing_class: the tokenizer.
        train_dataset: the round-0 pairs, ``{"prompt": [...], "completion": [...]}`` or a ``datasets.Dataset``
            with those columns; ``None`` when the model is already trained.
        prompts: the prompts the loop completes each round.
        correct: ``correct((prompts, completions)) -> bool per sample``, given to the verifier only.
        evaluate: ``evaluate(generator, round) -> dict`` logged after every fit.
    """

    def __init__(self, model, args: SyntheticLoopConfig, processing_class, train_dataset, prompts,
                 correct: Callable[[Any], Any] | None = None,
                 evaluate: Callable[[Any, int], dict[str, Any]] | None = None) -> None:
        if not isinstance(args, SyntheticLoopConfig):
            raise input_error("SyntheticLoopTrainer", "args", "a SyntheticLoopConfig", describe(args))
        if args.loop_verifier != "none" and not callable(correct):
            raise input_error("SyntheticLoopTrainer", "correct", f"a correctness function for the "
                              f"{args.loop_verifier!r} verifier", describe(correct))
        self.initial = None
        if train_dataset is not None:
            columns = train_dataset if isinstance(train_dataset, dict) else train_dataset.to_dict()
            if not {"prompt", "completion"} <= set(columns) or not columns["prompt"]:
                raise input_error("SyntheticLoopTrainer", "train_dataset", "prompt and completion columns with rows",
                                  describe(train_dataset))
            self.initial = (np.array(columns["prompt"], dtype=object), np.array(columns["completion"], dtype=object))
        self.args = args
        self.generator = CausalLMGenerator(model, processing_class, args, prompts, args.samples_per_prompt,
                                           args.loop_max_new_tokens, args.loop_temperature)
        if args.loop_verifier == "none":
            self.policy = Replace()
        elif args.loop_verifier == "exact":
            self.policy = Verify(ExactVerifier(correct))
        else:
            self.policy = Verify(NoisyVerifier(correct, args.loop_verifier_eta))
        self.evaluate = evaluate
        self.history: LoopHistory | None = None

    def train(self) -> LoopHistory:
        """Run round 0 and ``args.loop_rounds`` rounds; returns (and keeps) the :class:`LoopHistory`."""
        loop = SyntheticLoop(self.generator, self.policy, self.args.loop_rounds,
                             n_samples=len(self.generator.prompts) * self.generator.samples_per_prompt,
                             seed=self.args.seed, evaluate=self.evaluate, copy_generator=False)
        self.history = loop.run(self.initial)
        return self.history


def addition_correct(samples) -> np.ndarray:
    """Correctness of ``"a+b="`` completions: the completion parses as the integer ``a + b``."""
    prompts, completions = samples
    out = np.zeros(len(prompts), dtype=bool)
    for i, (p, c) in enumerate(zip(prompts, completions)):
        a, b = p.rstrip("=").split("+")
        out[i] = c.isdigit() and int(c) == int(a) + int(b)
    return out

