"""Baselines for inverting a transformation with the same energy, hypotheses and energy-evaluation budget as TIED.

- :class:`RandomBestOfN`: ``N`` draws ``exp(c)``, ``c ~ N(0, sigma^2 I)`` with ``sigma`` the forward
  marginal's coefficient spread at the horizon (:func:`~icml26.models.tied.sampler.forward_marginal_std`), and
  the lowest energy kept. It is what TIED's min-energy selection would reduce to if the sampler did nothing.
- :class:`LieLAC`: Adam on Lie-algebra coefficients ``g = exp(c)`` (Shumaylov et al., ICLR 2025, arXiv
  2410.02698; official ``group_optimizer.py``: lr 0.01, 100 steps, 64 hypotheses with init std 0.3).
- :class:`KineticLangevin`: kinetic Langevin Monte Carlo on ``G`` with a left-trivialised momentum (Kong & Tao,
  COLT 2024, Algorithm 1; official ``EnergyKineticLangevinSampler``)::

      m <- e^{-f h} m - (1 - e^{-f h}) / f grad U + sqrt(1 - e^{-2 f h}) xi,   g <- g exp(h m)

- :class:`FoCal`: Bayesian optimisation of the coefficients in a box (``sutkarsh/focal`` with the
  ``bayesian-optimization`` package: 5 initial points and 5 iterations, one hypothesis, one input at a time).
  Needs the optional extra ``icml26[tied]``.

All return a :class:`~icml26.models.tied.sampler.TIEDResult` (lowest energy over hypotheses and steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from icml26.errors import input_error
from icml26.validation import check_finite, check_int

from .groups import MatrixLieGroup
from .sampler import TIEDResult, _Tracker, check_images, pulled_back_energy

__all__ = ["RandomBestOfN", "LieLAC", "KineticLangevin", "FoCal", "right_gradient"]


def right_gradient(group: MatrixLieGroup, potential: Callable[[torch.Tensor], torch.Tensor], g: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """``grad_eps U(g (I + hat(eps)))`` at 0 (the left-trivialised gradient) and ``U(g)``; ``U: (N, n, n) -> (N,)``."""
    with torch.enable_grad():
        eps = torch.zeros(g.shape[0], group.dim, dtype=g.dtype, device=g.device, requires_grad=True)
        u = potential(g @ group.linearized_exp(eps))
        (grad,) = torch.autograd.grad(u.sum(), eps)
    return grad, u.detach()


class _ImageBaseline:
    name = "baseline"

    def __init__(self, group: MatrixLieGroup, energy, *, hypotheses: int, temperature: float, seed: int,
                 dtype: str = "float32") -> None:
        fn = type(self).__name__
        if not isinstance(group, MatrixLieGroup):
            raise TypeError(f"{fn}: group: expected a MatrixLieGroup, got {type(group).__name__}")
        if not callable(energy):
            raise input_error(fn, "energy", "a callable from a batch to (B,)", type(energy).__name__)
        if dtype not in ("float32", "float64"):
            raise input_error(fn, "dtype", "float32 or float64", dtype)
        self.group, self.energy = group, energy
        self.hypotheses = check_int(fn, "hypotheses", hypotheses, low=1)
        self.temperature = check_finite(fn, "temperature", temperature, positive=True)
        self.seed, self.dtype = int(seed), getattr(torch, dtype)

    def _setup(self, x_tilde):
        fn = f"{type(self).__name__}.sample"
        x = check_images(x_tilde, self.group, fn).to(self.dtype)
        x_rep = x.repeat_interleave(self.hypotheses, 0)

        def energy_of(g):  # (N, 3, 3) -> (N,), energies without the temperature
            return pulled_back_energy(self.group, self.energy, x_rep, g[:, None], function=fn)[:, 0]

        return x, x_rep, energy_of, torch.Generator().manual_seed(self.seed)


class RandomBestOfN(_ImageBaseline):
    """``draws`` elements per hypothesis from ``exp(N(0, std^2 I))``; the lowest energy over all of them.

    ``RandomBestOfN.matched(group, energy, config)`` takes ``std`` from TIED's forward marginal and as many
    draws as TIED's energy evaluations.
    """

    name = "random best-of-N"

    def __init__(self, group, energy, *, draws: int, std: float, hypotheses: int = 1, temperature: float = 1.0,
                 chunk: int = 16, seed: int = 0, dtype: str = "float32") -> None:
        super().__init__(group, energy, hypotheses=hypotheses, temperature=temperature, seed=seed, dtype=dtype)
        self.draws = check_int("RandomBestOfN", "draws", draws, low=1)
        self.std = check_finite("RandomBestOfN", "std", std, positive=True)
        self.chunk = check_int("RandomBestOfN", "chunk", chunk, low=1)

    @classmethod
    def matched(cls, group, energy, config, **kwargs) -> RandomBestOfN:
        from .sampler import forward_marginal_std

        per_hypothesis = config.energy_evaluations // config.hypotheses
        return cls(group, energy, draws=per_hypothesis, std=forward_marginal_std(config), hypotheses=config.hypotheses,
                   temperature=config.temperature, seed=config.seed, dtype=config.dtype, **kwargs)

    @torch.no_grad()
    def sample(self, x_tilde: torch.Tensor) -> TIEDResult:
        x, x_rep, energy_of, gen = self._setup(x_tilde)
        N = x_rep.shape[0]
        tracker = None
        done = 0
        while done < self.draws:
            r = min(self.chunk, self.draws - done)
            c = self.group.random_coeff((N, r), self.std, generator=gen, dtype=self.dtype)
            g = self.group.exp(c)
            fn = f"{type(self).__name__}.sample"
            e = pulled_back_energy(self.group, self.energy, x_rep, g, function=fn)  # (N, r)
            best = e.argmin(1)
            gb, eb = g[torch.arange(N), best], e[torch.arange(N), best]
            if tracker is None:
                tracker = _Tracker(gb, eb)
            else:
                tracker.update(gb, eb)
            done += r
        return tracker.result(x.shape[0], self.hypotheses, self.draws * self.hypotheses)


class LieLAC(_ImageBaseline):
    """Adam (``lr``) on coefficients ``c`` with ``g = exp(c)``, ``steps`` steps from ``c ~ N(0, init_std^2)``.

    One energy evaluation (and its gradient) per step and hypothesis; the lowest energy over steps and
    hypotheses is returned.
    """

    name = "LieLAC (Adam)"

    def __init__(self, group, energy, *, steps: int = 100, lr: float = 0.01, init_std: float = 0.3,
                 hypotheses: int = 64, temperature: float = 1.0, seed: int = 0, dtype: str = "float32") -> None:
        super().__init__(group, energy, hypotheses=hypotheses, temperature=temperature, seed=seed, dtype=dtype)
        self.steps = check_int("LieLAC", "steps", steps, low=1)
        self.lr = check_finite("LieLAC", "lr", lr, positive=True)
        self.init_std = float(init_std)
        if not (self.init_std >= 0):
            raise input_error("LieLAC", "init_std", "a non-negative number", init_std)

    def sample(self, x_tilde: torch.Tensor) -> TIEDResult:
        x, x_rep, energy_of, gen = self._setup(x_tilde)
        N = x_rep.shape[0]
        c = self.group.random_coeff(N, self.init_std, generator=gen, dtype=self.dtype).requires_grad_(True)
        opt = torch.optim.Adam([c], lr=self.lr)
        tracker = None
        for _ in range(self.steps):
            g = self.group.exp(c)
            e = energy_of(g)
            if tracker is None:
                tracker = _Tracker(g.detach(), e.detach())
            else:
                tracker.update(g.detach(), e.detach())
            opt.zero_grad(set_to_none=True)
            (e.sum() / self.temperature).backward()
            opt.step()
        return tracker.result(x.shape[0], self.hypotheses, self.steps * self.hypotheses)


class KineticLangevin(_ImageBaseline):
    """Kinetic Langevin on ``G`` (Kong & Tao 2024) for ``U = E / T``; the lowest energy over steps is returned.

    ``init_std = 0`` starts every hypothesis at the identity (official image setting); ``clip`` clips the
    trivialised gradient per sample. :meth:`sample_density` runs it on a density on ``G`` without selection.
    """

    name = "kinetic Langevin"

    def __init__(self, group, energy=None, *, steps: int = 1600, step_size: float = 2e-4, friction: float = 1.0,
                 clip: float | None = 20.0, init_std: float = 0.0, hypotheses: int = 4, temperature: float = 1.0,
                 seed: int = 0, dtype: str = "float32") -> None:
        super().__init__(group, energy if energy is not None else (lambda x: x.sum((1, 2, 3))),
                         hypotheses=hypotheses, temperature=temperature, seed=seed, dtype=dtype)
        self.steps = check_int("KineticLangevin", "steps", steps, low=1)
        self.step_size = check_finite("KineticLangevin", "step_size", step_size, positive=True)
        self.friction = check_finite("KineticLangevin", "friction", friction, positive=True)
        if clip is not None:
            check_finite("KineticLangevin", "clip", clip, positive=True)
        self.clip, self.init_std = clip, float(init_std)

    def _run(self, potential, g, gen, on_eval=None) -> torch.Tensor:
        h, f = self.step_size, self.friction
        decay = math.exp(-f * h)
        drift, noise = (1 - decay) / f, math.sqrt(1 - math.exp(-2 * f * h))
        m = torch.zeros(g.shape[0], self.group.dim, dtype=g.dtype, device=g.device)
        for _ in range(self.steps):
            grad, u = right_gradient(self.group, potential, g)
            if on_eval is not None:
                on_eval(g, u)
            if self.clip is not None:
                norm = grad.norm(dim=1, keepdim=True).clamp_min(1e-30)
                grad = grad * (self.clip / norm).clamp(max=1.0)
            xi = torch.randn(g.shape[0], self.group.dim, generator=gen, dtype=g.dtype).to(g.device)
            m = decay * m - drift * grad + noise * xi
            g = g @ self.group.exp(h * m)
        return g

    def sample_density(self, log_density: Callable[[torch.Tensor], torch.Tensor], init: torch.Tensor) -> torch.Tensor:
        """Run the chains from ``init`` ``(N, n, n)`` on ``exp(log_density)``; the final states (no selection)."""
        gen = torch.Generator().manual_seed(self.seed)
        with torch.no_grad():
            return self._run(lambda g: -log_density(g), init.to(self.dtype), gen)

    def sample(self, x_tilde: torch.Tensor) -> TIEDResult:
        x, x_rep, energy_of, gen = self._setup(x_tilde)
        N = x_rep.shape[0]
        g = self.group.exp(self.group.random_coeff(N, self.init_std, generator=gen, dtype=self.dtype))
        tracker: list[_Tracker] = []

        def on_eval(gg, u):  # the gradient's own evaluation at gg is the energy there: track it
            e = u * self.temperature
            tracker.append(_Tracker(gg, e)) if not tracker else tracker[0].update(gg, e)

        with torch.no_grad():
            g = self._run(lambda gg: energy_of(gg) / self.temperature, g, gen, on_eval)
            tracker[0].update(g, energy_of(g))
        return tracker[0].result(x.shape[0], self.hypotheses, (self.steps + 1) * self.hypotheses)


class FoCal(_ImageBaseline):
    """Bayesian optimisation of the coefficients in ``[-bound, bound]^m`` per input (``bayesian-optimization``,
    ``init_points`` random points then ``n_iter`` acquisitions; official FoCal settings 5 + 5, one hypothesis)."""

    name = "FoCal (Bayesian optimisation)"

    def __init__(self, group, energy, *, init_points: int = 5, n_iter: int = 5, bound: float = 0.5,
                 temperature: float = 1.0, seed: int = 0, dtype: str = "float32") -> None:
        super().__init__(group, energy, hypotheses=1, temperature=temperature, seed=seed, dtype=dtype)
        self.init_points = check_int("FoCal", "init_points", init_points, low=1)
        self.n_iter = check_int("FoCal", "n_iter", n_iter, low=0)
        self.bound = check_finite("FoCal", "bound", bound, positive=True)

    @torch.no_grad()
    def sample(self, x_tilde: torch.Tensor) -> TIEDResult:
        try:
            from bayes_opt import BayesianOptimization
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError("FoCal needs the optional package bayesian-optimization: pip install 'icml26[tied]'") \
                from exc
        x, _, _, _ = self._setup(x_tilde)
        fn = f"{type(self).__name__}.sample"
        m = self.group.dim
        best_g, best_e, history = [], [], []
        for b in range(x.shape[0]):
            xb = x[b:b + 1]

            def objective(**kw):
                c = torch.tensor([[kw[f"c{i}"] for i in range(m)]], dtype=self.dtype)
                e = pulled_back_energy(self.group, self.energy, xb, self.group.exp(c)[:, None], function=fn)
                return -float(e[0, 0])

            opt = BayesianOptimization(f=objective, pbounds={f"c{i}": (-self.bound, self.bound) for i in range(m)},
                                       random_state=self.seed + b, verbose=0)
            opt.maximize(init_points=self.init_points, n_iter=self.n_iter)
            c = torch.tensor([[opt.max["params"][f"c{i}"] for i in range(m)]], dtype=self.dtype)
            best_g.append(self.group.exp(c)[0])
            best_e.append(-opt.max["target"])
            values = [-r["target"] for r in opt.res]
            history.append(torch.tensor(values, dtype=self.dtype).cummin(0).values)
        g = torch.stack(best_g)
        e = torch.tensor(best_e, dtype=self.dtype)
        return TIEDResult(g, e, g[:, None], e[:, None], torch.stack(history), self.init_points + self.n_iter)
