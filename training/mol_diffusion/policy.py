"""Diffusion policies under the two-stage procedure (arXiv 2605.25210, the diffusion-policy extension): a task is an
environment, the condition an observation history, the target an action chunk (Chi et al., diffusion_policy).

The paper pseudo-labels observations without expert actions with the environment's specialist; which states it
uses is not known, so both are options (Reconstruction):

- ``"specialist_rollouts"``: an offline pool, the states the specialists themselves visit;
- ``"on_policy"``: DAgger-like rounds, the states the current generalist visits (the distribution shift the
  paper's sub-optimality bound is about), each round pseudo-labelled and added to the pool.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from icml26.errors import input_error
from icml26.training.mol_diffusion.two_stage import TwoStageMOL, ddim_sample
from icml26.validation import check_choice, check_int

STATE_SOURCES = ("specialist_rollouts", "on_policy")


class DiffusionPolicy:
    """A callable ``conditions [n, C] -> action chunks [n, D]`` sampling ``model`` by DDIM (the scheduler, steps
    and clip of ``mol``); ``task`` selects the environment of a task-aware generalist."""

    def __init__(self, mol: TwoStageMOL, model: torch.nn.Module, task: int | None = None, seed: int = 0) -> None:
        self.mol, self.model, self.task = mol, model, task
        self.generator = torch.Generator().manual_seed(check_int("DiffusionPolicy", "seed", seed, low=0))

    def __call__(self, cond) -> np.ndarray:
        c = torch.as_tensor(np.asarray(cond, dtype=np.float32))
        task = None if self.task is None or not self.model.config.num_tasks else torch.full((len(c),), self.task)
        return ddim_sample(self.model, self.mol.scheduler_, c, task, steps=self.mol.sampler_steps,
                           generator=self.generator, clip_sample=self.mol.clip_range_).numpy()


def fit_two_stage_policy(mol: TwoStageMOL, paired, collect: Callable[[Callable[[int], DiffusionPolicy]],
                                                                     dict[int, np.ndarray]],
                         state_source: str = "specialist_rollouts", rounds: int = 2) -> TwoStageMOL:
    """Specialists on ``paired`` (demonstrations: ``cond``, ``target``, ``task``), then the generalist on
    pseudo-labelled states.

    Args:
        mol: the (unfitted) two-stage estimator.
        paired: the demonstrations.
        collect: ``(policy_for_task) -> {task: states [N, C]}``: rolls out ``policy_for_task(k)`` in each
            environment ``k`` and returns the conditions it met.
        state_source: ``"specialist_rollouts"`` (one pool from the specialists) or ``"on_policy"`` (``rounds``
            rounds of generalist rollouts, starting from the demonstrations' own states).
        rounds: on-policy rounds.
    """
    fn = "fit_two_stage_policy"
    check_choice(fn, "state_source", state_source, STATE_SOURCES)
    rounds = check_int(fn, "rounds", rounds, low=1)
    mol.fit_specialists(paired)

    def pool(states: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
        if not states:
            raise input_error(fn, "collect", "states of at least one task", states)
        return {"cond": np.concatenate([np.asarray(v) for v in states.values()]),
                "task": np.concatenate([np.full(len(v), k) for k, v in states.items()])}

    if state_source == "specialist_rollouts":
        states = collect(lambda k: DiffusionPolicy(mol, mol.specialists_[k], seed=mol._seed(6, k)))
        mol.pseudo_ = mol.pseudo_label(pool(states))
        return mol.fit_generalist(mol.pseudo_)
    cond = mol.paired_["cond"].numpy()
    task = mol.paired_["task"].numpy()
    pseudo = [mol.pseudo_label({"cond": cond, "task": task})]
    mol.fit_generalist(_concat(pseudo))
    for r in range(rounds):
        states = collect(lambda k: DiffusionPolicy(mol, mol.generalist_, task=k, seed=mol._seed(7, r, k)))
        pseudo.append(mol.pseudo_label(pool(states)))
        mol.fit_generalist(_concat(pseudo))
    mol.pseudo_ = _concat(pseudo)
    return mol


def _concat(parts):
    import datasets

    return datasets.concatenate_datasets(parts)


__all__ = ["STATE_SOURCES", "DiffusionPolicy", "fit_two_stage_policy"]
