"""A synthetic tense-inflection task for R2G's language setting (:mod:`icml26.training.r2g.loss`).

Reconstruction of the authors' tense-inflection task (their code builds on shikharmurty/structural-grokking,
Murty et al. 2023): past-tense sentences rewritten in the present, with subject-verb agreement across a
relative clause or prepositional phrase; the out-of-distribution split holds the sentences whose
modifier noun has the other number than the subject (only the hierarchical rule is right there).
Trained with ``R2GSFTTrainer`` on a tiny Qwen3 (:func:`icml26.training.r2g.tense_trainer`).
"""

from __future__ import annotations

import random

import torch

from icml26.errors import described, input_error
from icml26.utils import IGNORE_INDEX
from icml26.validation import check_int

__all__ = ["INTRANSITIVE", "NOUNS", "TENSE_PROMPT_SUFFIX", "TRANSITIVE", "tense_accuracy", "tense_dataset",
           "tense_tokenize"]

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

    check_int("tense_dataset", "n_train", n_train, low=1)
    check_int("tense_dataset", "n_val", n_val, low=0)
    check_int("tense_dataset", "n_ood", n_ood, low=0)
    rng = random.Random(seed)
    in_dist = lambda n: [_sentence(rng, rng.choice([None, False])) for _ in range(n)]  # noqa: E731
    ood = [_sentence(rng, True) for _ in range(n_ood)]
    return DatasetDict(train=Dataset.from_list(in_dist(n_train)), validation=Dataset.from_list(in_dist(n_val)),
                       ood=Dataset.from_list(ood))


def tense_tokenize(dataset, tokenizer, *, r2g_positions: int = 5):
    """Pre-tokenise prompt-completion rows: ``input_ids``, ``labels`` (completion and EOS only) and
    ``r2g_mask`` on the first ``r2g_positions`` tokens (positions 0-4, as in the authors' tense code)."""
    check_int("tense_tokenize", "r2g_positions", r2g_positions, low=0)
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        raise input_error("tense_tokenize", "tokenizer", "a tokenizer with an eos_token_id (the completion ends with it)",
                          described(f"{type(tokenizer).__name__} without one"))

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
    check_int("tense_accuracy", "batch_size", batch_size, low=1)
    check_int("tense_accuracy", "pad_token_id", pad_token_id, low=0)
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


