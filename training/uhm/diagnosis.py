"""Diagnosis tools of the UHM PointMaze2D study (Universal Horizon Models, ICML 2026): a UHM target whose
horizon model is the true simulator (a reference arm, never a learner), the learned flow model measured
against the true dynamics, and a categorical model's table. ``simulate`` is
:func:`icml26.eval.tasks.uhm.simulate_horizons` (passed in: this layer does not import the task)."""

from __future__ import annotations

__all__ = ["SimulatorUHMTarget", "flow_quality", "model_table"]


def model_table(model, n_states: int, n_actions: int, n: int):
    """``m_theta(. | s, a, n)`` for every pair, ``[S, A, S]``."""
    import torch

    states = torch.eye(n_states).repeat_interleave(n_actions, 0)
    actions = torch.eye(n_actions).repeat(n_states, 1)
    return model.probs(states, actions, torch.full((n_states * n_actions,), n)).numpy().reshape(
        n_states, n_actions, n_states)


class SimulatorUHMTarget:
    """The UHM target with the true dynamics as its horizon model (the diagnosis arm, never a learner): the
    same ``n ~ p_H`` and weights as :class:`~icml26.training.uhm.TorchUHMTarget`, ``s_e`` simulated."""

    def __init__(self, env, weights, norm, scale, centre, reward_fn, seed, simulate):
        import numpy as np

        self.env, self.weights, self.norm, self.scale, self.centre = env, weights, norm, scale, centre
        self.reward_fn, self.rng, self.simulate = reward_fn, np.random.default_rng(seed), simulate

    def __call__(self, batch, q_fn, policy):
        import torch

        from icml26.training.uhm import nu_target

        s, a, r = batch["states"], batch["actions"], batch["rewards"]
        n = self.weights.sample(s.shape[0], self.rng)
        pos = (s * self.scale + self.centre).numpy().astype(float)
        act = lambda p: policy(self.norm(p)).numpy().astype(float)  # noqa: E731
        s_e = self.norm(self.simulate(self.env, pos, a.numpy().astype(float), n, act, self.rng))
        return nu_target(r, self.reward_fn(s_e), q_fn(s_e, policy(s_e)), torch.from_numpy(n), self.weights), 1


def flow_quality(env, model, ac, S, A, norm, scale, centre, k_max: int, seed: int, simulate, pairs: int = 48,
                 draws: int = 32) -> list[dict[str, float]]:
    """The learned flow UHM against the true dynamics under the final actor, at ``n = 1, 10, 25, k_max``:
    for ``pairs`` dataset ``(s, a)``, ``draws`` model samples and ``draws`` simulated rollouts each; the mean
    distance between their means, the energy distance of the two samples and the share of model samples in
    walls (positions in cell units)."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.from_numpy(rng.integers(0, len(S), pairs))
    s0, a0 = S[idx].repeat_interleave(draws, 0), A[idx].repeat_interleave(draws, 0)
    rows = []
    for n in sorted({1, 10, 25, k_max} & set(range(1, k_max + 1))):
        with torch.no_grad():
            x = (model.sample(s0, a0, torch.full((len(s0),), n), generator=gen) * scale + centre).numpy().astype(float)
            act = lambda p: ac.act(norm(p)).numpy().astype(float)  # noqa: E731
            y = simulate(env, (s0 * scale + centre).numpy().astype(float), a0.numpy().astype(float),
                                  np.full(len(s0), n), act, rng)
        xm, ym = x.reshape(pairs, draws, 2), y.reshape(pairs, draws, 2)
        d = lambda u, v: np.linalg.norm(u[:, :, None] - v[:, None], axis=-1).mean((1, 2))  # noqa: E731
        rows.append({"n": n, "distance of means": float(np.linalg.norm(xm.mean(1) - ym.mean(1), axis=-1).mean()),
                     "energy distance": float((2 * d(xm, ym) - d(xm, xm) - d(ym, ym)).mean()),
                     "model samples in walls": float(1 - env.free(x).mean()),
                     "true spread": float(ym.std(1).mean()), "model spread": float(xm.std(1).mean())})
    return rows
