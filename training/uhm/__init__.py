"""Universal horizon models: the public face of ``icml26.training.uhm``."""

from __future__ import annotations

from icml26.training.uhm.actor_critic import (
    VARIANTS,
    ActorCriticConfig,
    OfflineActorCritic,
    TorchOneStepTD,
    TorchUHMTarget,
    categorical_uhm_loss,
    ema_update,
    td_flow_loss,
)
from icml26.training.uhm.horizons import (
    HorizonWeights,
    TabularGHM,
    TabularUHM,
    geometric,
    n_step,
    nu_bellman_operator,
    nu_target,
    target_moments,
    td_lambda,
    winsorized,
    xi_from_nu,
)
from icml26.training.uhm.neural import TDFlowUpdater, train_categorical_uhm
from icml26.training.uhm.targets import (
    DatasetTDLambda,
    GHMTarget,
    OneStepTD,
    RolloutTDLambda,
    TabularControlConfig,
    TabularCritic,
    TabularOneStepModel,
    UHMTarget,
    fit_tabular_critic,
)

__all__ = [
    "ActorCriticConfig", "DatasetTDLambda", "GHMTarget", "HorizonWeights", "OfflineActorCritic", "OneStepTD",
    "RolloutTDLambda", "TDFlowUpdater", "TabularControlConfig", "TabularCritic", "TabularGHM",
    "TabularOneStepModel", "TabularUHM", "TorchOneStepTD", "TorchUHMTarget", "UHMTarget", "VARIANTS",
    "categorical_uhm_loss", "ema_update", "fit_tabular_critic", "geometric", "n_step", "nu_bellman_operator",
    "nu_target", "target_moments", "td_flow_loss", "td_lambda", "train_categorical_uhm", "winsorized",
    "xi_from_nu",
]
