"""Universal horizon models (arXiv 2605.15603): the public face of ``icml26.training.uhm``.

The names load on first use (:mod:`icml26.lazy`), so importing the package, or its numpy-only modules
``data``, ``horizons`` and ``targets`` (what the mazes of :mod:`icml26.eval.tasks.uhm` use), does not import torch.
"""

from __future__ import annotations

from icml26.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("VARIANTS", "ActorCriticConfig", "OfflineActorCritic", "TorchOneStepTD", "TorchUHMTarget",
                     "categorical_uhm_loss", "ema_update", "td_flow_loss"), "actor_critic"),
    **dict.fromkeys(("check_policy", "greedy_policy", "transition_arrays", "uniform_tie_policy"), "data"),
    **dict.fromkeys(("HorizonWeights", "TabularGHM", "TabularUHM", "geometric", "n_step", "nu_bellman_operator",
                     "nu_target", "target_moments", "td_lambda", "winsorized", "xi_from_nu"), "horizons"),
    **dict.fromkeys(("TDFlowUpdater", "train_categorical_uhm"), "neural"),
    **dict.fromkeys(("DatasetTDLambda", "GHMTarget", "OneStepTD", "RolloutTDLambda", "TabularControlConfig",
                     "TabularCritic", "TabularOneStepModel", "UHMTarget", "fit_tabular_critic"), "targets"),
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
