"""UHM models and losses: the flow head's n = 1 target, TD-flow variants, the categorical recursion,
save/load, the actor-critic step and bad input."""

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from icml26 import InputError
from icml26.models.uhm import UHMConfig, UniversalHorizonModel
from icml26.training import uhm
from icml26.training.uhm import (ActorCriticConfig, OfflineActorCritic, TorchOneStepTD, TorchUHMTarget,
                                              categorical_uhm_loss, td_flow_loss)


def _flow(k_max=5, **kw):
    torch.manual_seed(0)
    return UniversalHorizonModel(UHMConfig(state_dim=2, action_dim=2, hidden_size=32, k_max=k_max, ode_steps=4, **kw))


def _batch(B=16):
    g = torch.Generator().manual_seed(1)
    return {"states": torch.randn(B, 2, generator=g), "actions": torch.rand(B, 2, generator=g) * 2 - 1,
            "next_states": torch.randn(B, 2, generator=g), "rewards": torch.zeros(B)}


def test_flow_target_at_n1_is_next_state_minus_noise():
    model = _flow()
    batch = _batch()
    w = uhm.n_step(1, 0.99)  # every horizon is 1
    g = torch.Generator().manual_seed(5)
    loss = td_flow_loss(model, copy.deepcopy(model), batch, lambda s: torch.zeros(len(s), 2), w, generator=g)
    # rebuild the same draws: x0 then t from the same generator stream
    g = torch.Generator().manual_seed(5)
    torch.randint(0, 2 ** 31 - 1, (1,), generator=g)
    x0 = torch.randn(batch["states"].shape, generator=g)
    t = torch.rand((16,), generator=g)
    xt = (1 - t)[:, None] * x0 + t[:, None] * batch["next_states"]
    v = model(batch["states"], batch["actions"], torch.ones(16, dtype=torch.long), x_t=xt, t=t).velocity
    assert loss.item() == pytest.approx((v - (batch["next_states"] - x0)).pow(2).sum(-1).mean().item(), rel=1e-6)


@pytest.mark.parametrize("variant", ["coupled", "td2"])
def test_td_flow_loss_trains_and_bootstraps_from_the_target(variant):
    model, target = _flow(), _flow()
    batch = _batch()
    w = uhm.winsorized(0.99, 0.5, 5)
    loss = td_flow_loss(model, target, batch, lambda s: torch.zeros(len(s), 2), w, variant=variant,
                        generator=torch.Generator().manual_seed(0))
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters())
    assert all(p.grad is None for p in target.parameters())
    x = model.sample(batch["states"], batch["actions"], torch.full((16,), 3), generator=torch.Generator().manual_seed(0))
    assert x.shape == (16, 2)


def test_save_load_round_trip(tmp_path):
    model = _flow()
    model.save_pretrained(tmp_path)
    again = UniversalHorizonModel.from_pretrained(tmp_path)
    b = _batch()
    kw = dict(x_t=b["next_states"], t=torch.full((16,), 0.3))
    n = torch.full((16,), 2)
    assert torch.equal(model(b["states"], b["actions"], n, **kw).velocity, again(b["states"], b["actions"], n, **kw).velocity)
    assert again.config.k_max == 5 and again.config.output == "flow"


def test_categorical_recursion_learns_the_two_step_law():
    """A 3-cell chain: the categorical UHM at n = 2 approaches P^2 from transitions alone."""
    P = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    torch.manual_seed(0)
    cfg = UHMConfig(state_dim=3, action_dim=1, output="categorical", num_cells=3, hidden_size=32, k_max=2)
    model = UniversalHorizonModel(cfg)
    target = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    s = torch.arange(3).repeat(20)
    batch = {"states": F.one_hot(s, 3).float(), "actions": torch.ones(60, 1), "next_cells": (s + 1) % 3}
    policy = torch.ones(3, 1)
    for i in range(300):
        loss = categorical_uhm_loss(model, target, batch, policy, uhm.td_lambda(0.9, 0.5, 2),
                                    generator=torch.Generator().manual_seed(i))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i % 20 == 0:
            target.load_state_dict(model.state_dict())
    probs = model.probs(torch.eye(3), torch.ones(3, 1), torch.full((3,), 2)).numpy()
    assert np.abs(probs - P @ P).max() < 0.1


def test_actor_critic_update_with_the_uhm_target():
    model = _flow()
    ac = OfflineActorCritic(2, 2, ActorCriticConfig(hidden_size=16), seed=0)
    batch = _batch()
    target = TorchUHMTarget(model, uhm.winsorized(0.99, 0.95, 5), lambda s: (s.norm(dim=-1) < 0.5).float())
    out = ac.update(batch, target)
    out2 = ac.update(batch, TorchOneStepTD(0.99))
    assert out["model_calls"] == 1 and out2["model_calls"] == 0 and "actor_loss" in out2
    assert ac.act(batch["states"]).abs().max() <= 1.0


def test_critic_layer_norm_is_in_the_critics_only_and_normalises_their_hidden_layers():
    ac = OfflineActorCritic(2, 2, ActorCriticConfig(hidden_size=16, critic_layer_norm=True), seed=0)
    norms = lambda m: [x for x in m.modules() if isinstance(x, torch.nn.LayerNorm)]  # noqa: E731
    assert len(norms(ac.q1)) == len(norms(ac.q2)) == len(norms(ac.q1_t)) == 2 and not norms(ac.actor)
    assert not norms(OfflineActorCritic(2, 2, ActorCriticConfig(hidden_size=16), seed=0).q1)
    h = ac.q1[:2](torch.randn(64, 4) * 10)  # the first hidden layer after its LayerNorm
    assert torch.allclose(h.mean(-1), torch.zeros(64), atol=1e-5)
    assert ac.update(_batch(), TorchOneStepTD(0.99))["model_calls"] == 0


def test_model_bad_input():
    with pytest.raises(InputError, match="UHMConfig: output"):
        UHMConfig(output="diffusion")
    with pytest.raises(InputError, match="num_cells"):
        UHMConfig(output="categorical")
    model = _flow()
    b = _batch(4)
    with pytest.raises(InputError, match="horizons: expected values in 1..5"):
        model(b["states"], b["actions"], torch.full((4,), 6), x_t=b["states"], t=torch.zeros(4))
    with pytest.raises(InputError, match="states"):
        model(torch.zeros(4, 3), b["actions"], torch.ones(4, dtype=torch.long), x_t=b["states"], t=torch.zeros(4))
    with pytest.raises(InputError, match="x_t"):
        model(b["states"], b["actions"], torch.ones(4, dtype=torch.long))
    with pytest.raises(InputError, match="variant"):
        td_flow_loss(model, model, b, lambda s: s, uhm.winsorized(0.9, 0.9, 5), variant="td3")
    with pytest.raises(InputError, match="k_max"):
        td_flow_loss(model, model, b, lambda s: s, uhm.winsorized(0.9, 0.9, 9))
