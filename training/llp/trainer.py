"""Train any Hugging Face classifier on label proportions: :class:`LLPTrainer` and :class:`LLPDataCollator`.

Paper: arXiv 2509.15145 (the estimators in :mod:`icml26.training.llp.risk`). One dataset row is one bag: its
instance fields hold one entry per instance (``input_ids``: a list of token lists, or
``pixel_values`` / feature lists), and ``proportions`` holds the bag's label proportions (``[c]``).
The collator flattens the bags of a batch into one batch of instances for the model and keeps
``proportions`` and ``bag_sizes``; :meth:`LLPTrainer.compute_loss` regroups the model's logits
``[N, c]`` into ``[B, k_max, c]`` with a mask and applies :class:`~icml26.training.llp.risk.LLPLoss`, as TRL's
trainers override ``compute_loss``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import Trainer, TrainingArguments, default_data_collator

from icml26.errors import described, input_error
from icml26.training.distributed import use_cpu_when_launched_without_gpu
from icml26.training.llp.risk import LLPLoss

__all__ = ["LLPConfig", "LLPDataCollator", "LLPTrainer", "LLPTrainingArguments", "logits_to_bags"]


@dataclass
class LLPConfig:
    """LLP settings; every field is prefixed ``llp_`` so it merges with ``TrainingArguments``
    (``HfArgumentParser((TrainingArguments, LLPConfig))`` or the merged :class:`LLPTrainingArguments`)."""

    llp_method: str = field(default="lowvar", metadata={"help": "lowvar (the paper's estimator, reconstructed), "
                                                                "easyllp or dllp"})
    llp_base: str = field(default="log", metadata={"help": "instance loss: log, squared, brier, hinge or focal"})
    llp_prob_clip: float = field(default=1e-3, metadata={"help": "probability clip of the log and focal losses"})
    llp_mu: str = field(default="loo", metadata={"help": "loo (leave-one-bag-out in the batch) or ema"})
    llp_ema_decay: float = field(default=0.99, metadata={"help": "decay of the running mean when llp_mu=ema"})
    llp_prior: list[float] | None = field(default=None, metadata={"help": "class prior (default: the mean of the "
                                                                          "training bags' proportions)"})
    llp_nonnegative: bool = field(default=True, metadata={"help": "per-class non-negative correction of the lowvar "
                                                                  "and easyllp objective (nnPU-style; on by default: "
                                                                  "a neural network's unguarded objective is "
                                                                  "unbounded below)"})

    def __post_init__(self) -> None:
        self.llp_loss()  # validates the fields

    def llp_loss(self) -> LLPLoss:
        """The :class:`~icml26.training.llp.risk.LLPLoss` these settings describe."""
        prior = None if self.llp_prior is None else torch.tensor(self.llp_prior, dtype=torch.float64)
        return LLPLoss(self.llp_method, base=self.llp_base, prob_clip=self.llp_prob_clip, prior=prior, mu=self.llp_mu,
                       ema_decay=self.llp_ema_decay, nonnegative=self.llp_nonnegative)


@dataclass
class LLPTrainingArguments(TrainingArguments, LLPConfig):
    """``TrainingArguments`` with the :class:`LLPConfig` fields merged in (one HfArgumentParser class)."""

    def __post_init__(self) -> None:
        LLPConfig.__post_init__(self)
        use_cpu_when_launched_without_gpu(self)
        super().__post_init__()

BAG_COLUMNS = ("proportions", "bag_sizes")


def logits_to_bags(logits: torch.Tensor, bag_sizes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[N, c]`` instance logits (bags in order, ``N = sum(bag_sizes)``) as ``([B, k_max, c], mask[B, k_max])``."""
    sizes = bag_sizes.to(device=logits.device, dtype=torch.long)
    if logits.dim() == 1:
        logits = logits.unsqueeze(-1)
    if logits.dim() != 2 or int(sizes.sum()) != logits.shape[0]:
        raise input_error("logits_to_bags", "logits", f"[N, c] with N = sum(bag_sizes) = {int(sizes.sum())}",
                          described(f"shape {tuple(logits.shape)}"))
    B, k_max = sizes.numel(), int(sizes.max())
    bag = torch.repeat_interleave(torch.arange(B, device=logits.device), sizes)
    slot = torch.arange(logits.shape[0], device=logits.device) - torch.repeat_interleave(sizes.cumsum(0) - sizes, sizes)
    padded = logits.new_zeros(B, k_max, logits.shape[-1]).index_put((bag, slot), logits)
    mask = torch.zeros(B, k_max, dtype=torch.bool, device=logits.device).index_put((bag, slot), torch.ones_like(bag, dtype=torch.bool))
    return padded, mask


class LLPDataCollator:
    """Batches bags: flattens their instances through ``base`` (e.g. ``DataCollatorWithPadding``; default:
    ``default_data_collator``) and adds ``proportions [B, c]`` and ``bag_sizes [B]``.

    Every field of a bag other than ``proportions`` must hold one entry per instance of the bag.
    """

    def __init__(self, base=None) -> None:
        self.base = base if base is not None else default_data_collator

    def __call__(self, bags: list[dict[str, Any]]) -> dict[str, Any]:
        instances, sizes, proportions = [], [], []
        for number, bag in enumerate(bags):
            if "proportions" not in bag:
                raise input_error("LLPDataCollator", f"bags[{number}]", "a 'proportions' field",
                                  described(f"fields {sorted(bag)}"))
            fields = {key: value for key, value in bag.items() if key not in BAG_COLUMNS}
            lengths = {key: len(value) for key, value in fields.items()}
            if not fields or len(set(lengths.values())) != 1 or 0 in lengths.values():
                raise input_error("LLPDataCollator", f"bags[{number}]", "instance fields of one common length >= 1 "
                                  "(one entry per instance)", described(f"lengths {lengths}"))
            k = next(iter(lengths.values()))
            instances += [{key: value[i] for key, value in fields.items()} for i in range(k)]
            sizes.append(k)
            proportions.append(np.asarray(bag["proportions"], dtype=np.float32))
        batch = dict(self.base(instances))
        batch["proportions"] = torch.from_numpy(np.stack(proportions))
        batch["bag_sizes"] = torch.tensor(sizes, dtype=torch.long)
        return batch


class LLPTrainer(Trainer):
    """:class:`transformers.Trainer` on batches of bags, with an LLP loss on the model's logits.

    Args (besides ``Trainer``'s):
        llp_loss: an :class:`~icml26.training.llp.risk.LLPLoss` (default: from ``args`` when it is an
            :class:`LLPConfig` such as :class:`LLPTrainingArguments`, else ``LLPLoss("lowvar", nonnegative=True)``:
            the models trained here are neural networks, so the non-negative correction is on). When it has no
            prior, the instance-weighted mean of the training bags' proportions is used (when
            ``train_dataset`` has ``proportions`` and instance columns), else each batch's.

    The data collator defaults to :class:`LLPDataCollator`; a given collator is wrapped in one. The loss
    is a mean over the bags of a micro-batch, so the Trainer divides it by the accumulation steps.
    Evaluation reports the same loss on the evaluation bags.
    """

    def __init__(self, *args, llp_loss: LLPLoss | None = None, **kwargs) -> None:
        collator = kwargs.get("data_collator")
        if not isinstance(collator, LLPDataCollator):
            kwargs["data_collator"] = LLPDataCollator(collator)
        super().__init__(*args, **kwargs)
        if llp_loss is None:
            llp_loss = self.args.llp_loss() if isinstance(self.args, LLPConfig) else LLPLoss("lowvar", nonnegative=True)
        if not isinstance(llp_loss, LLPLoss):
            raise TypeError(f"LLPTrainer: llp_loss: expected an LLPLoss, got {type(llp_loss).__name__}")
        if llp_loss.prior is None and self.train_dataset is not None:
            llp_loss.prior = self._dataset_prior(self.train_dataset)
        self.llp_loss = llp_loss
        self.loss_is_scaled_for_ga = False  # a mean over bags: Trainer divides by the accumulation steps
        self.label_names = ["proportions"]  # so evaluation computes the loss

    @staticmethod
    def _dataset_prior(dataset) -> torch.Tensor | None:
        try:
            rows = [dataset[i] for i in range(len(dataset))]
        except TypeError:  # an iterable dataset: each batch's mean is used
            return None
        if not rows or "proportions" not in rows[0]:
            return None
        sizes, alpha = [], []
        for row in rows:
            lengths = [len(v) for key, v in row.items() if key not in BAG_COLUMNS]
            sizes.append(lengths[0] if lengths else 1)
            alpha.append(np.asarray(row["proportions"], dtype=np.float64))
        sizes_arr, alpha_arr = np.asarray(sizes, dtype=np.float64), np.stack(alpha)
        return torch.from_numpy((alpha_arr * sizes_arr[:, None]).sum(0) / sizes_arr.sum())

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if self._signature_columns is not None:
            self._signature_columns = [*self._signature_columns,
                                       *(c for c in BAG_COLUMNS if c not in self._signature_columns)]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        proportions = inputs.pop("proportions")
        bag_sizes = inputs.pop("bag_sizes")
        inputs.pop("labels", None)  # instance labels, if a dataset carries them, are not for training
        outputs = model(**inputs)
        logits, mask = logits_to_bags(outputs.logits, bag_sizes)
        loss = self.llp_loss(logits, proportions.to(logits.dtype), mask)
        return (loss, outputs) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = self._prepare_inputs(dict(inputs))
        with torch.no_grad():
            loss, outputs = self.compute_loss(model, inputs, return_outputs=True)
        if prediction_loss_only:
            return loss.detach(), None, None
        return loss.detach(), outputs.logits.detach(), None
