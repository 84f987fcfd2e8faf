"""TIED: training-free diffusion sampling of ``pi(g | x~) ~ exp(-E(act(g^-1, x~)) / T)`` on a matrix Lie group.

Kim, Kaba, Park, Hong, Ravanbakhsh, "Inverting Data Transformations via Diffusion Sampling" (arXiv
2602.08267); official code ``jw9730/tied``, ``src/group_sampler.py`` (``EnergyDiffusionSampler``).

Forward noising (right-multiplied Brownian motion in exponential coordinates), ``K`` steps of
``Delta = horizon / K`` with the geometric schedule ``gamma_k = gamma_min (gamma_max / gamma_min)^{tau_k}``,
``tau = linspace(0, 1, K)``::

    W_0 = I,  W_k = W_{k-1} exp(gamma_{k-1} sqrt(Delta) xi_k),  xi_k ~ N(0, I_m)
    l(W)  = -sum_k (gamma_{k-1} sqrt(Delta) xi_k) . tr(ad)          (modular log-weight, 0 if unimodular)

The left-trivialised score of the noised density ``p_t(g) = E_W[p_0(g W^-1) e^{-l(W)}]`` is estimated by
self-normalised importance sampling with ``M`` forward paths (:func:`trivialized_score`)::

    s_t(g) = grad_eps logsumexp_j [log p_0(g e^eps W_j^-1) - l_j]  at eps = 0

and the reverse sampler is ``g <- g exp(gamma_{t-1}^2 Delta clip(s) + gamma_{t-1} sqrt(Delta) xi)`` for
``t = K .. 1`` from ``g = W_K``. For inverting a transformation, :meth:`TIEDSampler.sample` runs ``H``
hypotheses per input and keeps the lowest-energy state over hypotheses and steps (the published
pipeline). Two options of ours (both on by default, both exact or equal in law):

- ``cache_paths``: one set of ``M`` forward paths ``W_1..W_K`` is drawn once and ``W_t`` reused at step
  ``t`` (``O(K M)`` group exponentials instead of the reference's ``O(K^2 M)``);
- ``linearize``: ``e^eps`` is replaced by ``I + sum_i eps_i s_i X_i``, whose gradient at ``eps = 0`` is the
  same, so no backward pass goes through ``matrix_exp``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.validation import check_choice, check_finite, check_int

from .energies import evaluate_energy
from .groups import MatrixLieGroup, act

__all__ = ["TIEDConfig", "TIEDSampler", "TIEDResult", "trivialized_score", "pulled_back_energy", "gamma_schedule",
           "forward_paths", "forward_marginal_std"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass
class TIEDConfig:
    """Settings of the TIED sampler (official ``EnergyDiffusionSampler`` arguments in brackets).

    - ``steps``: ``K``, forward and reverse steps [``num_steps``];
    - ``gamma_min``, ``gamma_max``: the geometric noise schedule; the defaults 0.01 -> 10 are the official
      SO(n) synthetic setting (images use 0.1 -> 1.0 for affine/SE(2), 0.01 -> 0.5 for homographies);
    - ``temperature``: ``T``, the energy's temperature: the target is ``exp(-E / T)``;
    - ``horizon``: the diffusion time the ``K`` steps cover (step ``Delta = horizon / K``; official: 1);
    - ``clip``: per-sample L2 clipping of the score (``None``: no clipping);
    - ``mc_paths``: ``M``, Monte-Carlo forward paths of the score estimator;
    - ``hypotheses``: ``H``, chains per input of :meth:`TIEDSampler.sample` (the best one is returned);
    - ``dtype``: ``"float32"`` or ``"float64"`` (use float64 for SO(n) checks and PDE groups);
    - ``cache_paths``: reuse one set of forward paths across reverse steps (ours; same law per step);
    - ``per_sample_paths``: independent Monte-Carlo paths per chain (default: shared by the batch, as the
      official code does; per-sample paths make the draws independent, which a KS test needs);
    - ``linearize``: first-order exponential inside the score (ours; identical gradient);
    - ``seed``: the sampler's own generator (global RNGs are never touched).
    """

    steps: int = 50
    gamma_min: float = 0.01
    gamma_max: float = 10.0
    temperature: float = 1.0
    horizon: float = 1.0
    clip: float | None = None
    mc_paths: int = 16
    hypotheses: int = 1
    dtype: str = "float32"
    cache_paths: bool = True
    per_sample_paths: bool = False
    linearize: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("steps", "mc_paths", "hypotheses"):
            check_int("TIEDConfig", name, getattr(self, name), low=1)
        for name in ("gamma_min", "gamma_max", "temperature", "horizon"):
            check_finite("TIEDConfig", name, getattr(self, name), positive=True)
        if self.gamma_min > self.gamma_max:
            raise input_error("TIEDConfig", "gamma_min", f"gamma_min <= gamma_max = {self.gamma_max}", self.gamma_min)
        if self.clip is not None:
            check_finite("TIEDConfig", "clip", self.clip, positive=True)
        check_choice("TIEDConfig", "dtype", self.dtype, sorted(_DTYPES))
        for name in ("cache_paths", "per_sample_paths", "linearize"):
            if not isinstance(getattr(self, name), bool):
                raise InputTypeError("TIEDConfig", name, "a bool", described(repr(getattr(self, name))))
        check_int("TIEDConfig", "seed", self.seed, low=0)

    @property
    def torch_dtype(self) -> torch.dtype:
        return _DTYPES[self.dtype]

    @property
    def energy_evaluations(self) -> int:
        """Energy evaluations per input of :meth:`TIEDSampler.sample`: ``H (1 + K (M + 1))``."""
        return self.hypotheses * (1 + self.steps * (self.mc_paths + 1))


def gamma_schedule(config: TIEDConfig) -> torch.Tensor:
    """``(K,)`` float64: ``gamma_k = gamma_min (gamma_max / gamma_min)^{tau_k}``, ``tau = linspace(0, 1, K)``."""
    tau = torch.linspace(0, 1, config.steps, dtype=torch.float64)
    return config.gamma_min * (config.gamma_max / config.gamma_min) ** tau


def forward_marginal_std(config: TIEDConfig, steps: int | None = None) -> float:
    """Coefficient-space standard deviation of the forward process after ``steps`` (default ``K``) steps:
    ``sqrt(sum_k gamma_{k-1}^2 Delta)`` (exact for an abelian group, the matched prior of the baselines)."""
    gam = gamma_schedule(config)[: config.steps if steps is None else steps]
    return float(torch.sqrt((gam ** 2).sum() * config.horizon / config.steps))


def forward_paths(group: MatrixLieGroup, shape: tuple[int, ...], length: int, config: TIEDConfig,
                  generator: torch.Generator, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward noising paths from ``I``: ``W`` of shape ``(*shape, length, n, n)`` (``W_1 .. W_length``) and the
    cumulative modular log-weights ``l`` of shape ``(*shape, length)``."""
    dtype = config.torch_dtype
    gam = gamma_schedule(config)[:length].to(dtype)
    dt = config.horizon / config.steps
    xi = torch.randn(*shape, length, group.dim, generator=generator, dtype=dtype).to(device)
    incr = xi * (gam.to(xi.device) * math.sqrt(dt))[:, None]
    steps = group.exp(incr)  # (*shape, length, n, n)
    W = torch.empty_like(steps)
    current = steps[..., 0, :, :]
    W[..., 0, :, :] = current
    for k in range(1, length):
        current = current @ steps[..., k, :, :]
        W[..., k, :, :] = current
    tr_ad = group.adjoint_trace().to(dtype=dtype, device=xi.device)
    logw = -torch.cumsum(incr @ tr_ad, dim=-1)
    return W, logw


def trivialized_score(group: MatrixLieGroup, log_density: Callable[[torch.Tensor], torch.Tensor], g: torch.Tensor,
                      paths: torch.Tensor, log_weights: torch.Tensor | None = None, *, linearize: bool = True
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """The Monte-Carlo left-trivialised score ``grad_eps logsumexp_j [log p_0(g e^eps W_j^-1) - l_j]`` at 0.

    ``g``: ``(B, n, n)``; ``paths``: ``(M, n, n)`` shared by the batch or ``(B, M, n, n)`` per chain;
    ``log_weights``: the matching ``(M,)`` / ``(B, M)`` modular log-weights (default 0); ``log_density`` maps
    ``(B, M, n, n)`` to ``(B, M)``. Returns the ``(B, m)`` score and the ``(B, M)`` log-densities (detached).
    With ``linearize`` the exponential is ``I + hat(eps)`` (same gradient at ``eps = 0``).
    """
    g = group.check_element(g, "trivialized_score")
    if g.ndim != 3:
        raise input_error("trivialized_score", "g", f"a batch of shape (B, {group.n}, {group.n})", describe(g))
    B = g.shape[0]
    if paths.ndim == 3:
        paths = paths.expand(B, *paths.shape)
    if paths.ndim != 4 or paths.shape[0] != B or paths.shape[-2:] != g.shape[-2:]:
        raise input_error("trivialized_score", "paths", f"(M, n, n) or ({B}, M, n, n)", describe(paths))
    M = paths.shape[1]
    if log_weights is None:
        log_weights = torch.zeros(B, M, dtype=g.dtype, device=g.device)
    log_weights = log_weights.expand(B, M)
    with torch.enable_grad():
        eps = torch.zeros(B, group.dim, dtype=g.dtype, device=g.device, requires_grad=True)
        step = group.linearized_exp(eps) if linearize else group.exp(eps)
        h = (g @ step)[:, None] @ group.inverse(paths)  # (B, M, n, n)
        logp = log_density(h)
        if not isinstance(logp, torch.Tensor) or logp.shape != (B, M):
            raise input_error("trivialized_score", "log_density", f"a callable returning shape ({B}, {M})",
                              described(f"output {describe(logp)}"))
        phi = torch.logsumexp(logp - log_weights, dim=1)
        (score,) = torch.autograd.grad(phi.sum(), eps)
    return score, logp.detach()


def pulled_back_energy(group: MatrixLieGroup, energy, x: torch.Tensor, g: torch.Tensor, *,
                       function: str = "pulled_back_energy") -> torch.Tensor:
    """``E(act(g^-1, x))`` for images ``x`` ``(N, C, H, W)`` and elements ``g`` ``(N, R, 3, 3)``: ``(N, R)``.

    The energy sees the sampling grid too (the boundary penalty reads it).
    """
    N, R = g.shape[:2]
    ginv = group.inverse(g).reshape(N * R, group.n, group.n)
    xc, grid = act(ginv, x.repeat_interleave(R, 0), return_grid=True)
    return evaluate_energy(energy, xc, grid, function=function).reshape(N, R)


@dataclass
class TIEDResult:
    """What :meth:`TIEDSampler.sample` (and the baselines) return per input.

    - ``g``: ``(B, n, n)`` the lowest-energy element found (``act(g^-1, x~)`` is the canonical input);
    - ``energy``: ``(B,)`` its energy ``E(act(g^-1, x~))`` (without the temperature);
    - ``hypotheses``, ``hypothesis_energy``: ``(B, H, n, n)`` / ``(B, H)`` the best state of each hypothesis;
    - ``energies_per_step``: ``(B, S)`` the lowest current energy over hypotheses after each step (column 0:
      the initial state);
    - ``evaluations``: energy evaluations per input.
    """

    g: torch.Tensor
    energy: torch.Tensor
    hypotheses: torch.Tensor
    hypothesis_energy: torch.Tensor
    energies_per_step: torch.Tensor
    evaluations: int
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in asdict(self).items()}


def check_images(x, group: MatrixLieGroup, fn: str) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{fn}: x_tilde: expected a tensor, got {type(x).__name__}")
    if x.ndim != 4 or x.shape[0] < 1:
        raise input_error(fn, "x_tilde", "images of shape (B, C, H, W)", describe(x))
    if group.n != 3:
        raise input_error(fn, "group", "a group of 3x3 image transformations", repr(group))
    return x


class _Tracker:
    """Keeps the lowest-energy state of every chain over all steps."""

    def __init__(self, g: torch.Tensor, e: torch.Tensor) -> None:
        self.best_g, self.best_e = g.clone(), e.clone()
        self.per_step = [e]

    def update(self, g: torch.Tensor, e: torch.Tensor) -> None:
        better = e < self.best_e
        self.best_g[better] = g[better]
        self.best_e = torch.where(better, e, self.best_e)
        self.per_step.append(e)

    def result(self, B: int, H: int, evaluations: int, **extra) -> TIEDResult:
        n = self.best_g.shape[-1]
        hyp_g, hyp_e = self.best_g.reshape(B, H, n, n), self.best_e.reshape(B, H)
        idx = hyp_e.argmin(1)
        steps = torch.stack(self.per_step, 1).reshape(B, H, -1).amin(1)
        return TIEDResult(hyp_g[torch.arange(B), idx], hyp_e[torch.arange(B), idx], hyp_g, hyp_e, steps,
                          evaluations, dict(extra))


class TIEDSampler:
    """TIED on ``group`` with ``energy`` (any callable batch -> ``(B,)``, or ``None`` for :meth:`sample_density`).

    >>> sampler = TIEDSampler(SE2(), PPCAEnergy.from_sklearn(pca, 50) + BoundaryPenalty(),
    ...                       TIEDConfig(steps=30, gamma_min=0.1, gamma_max=1.0, mc_paths=2, hypotheses=16))
    >>> out = sampler.sample(x_tilde)            # out.g: (B, 3, 3); act(SE2().inverse(out.g), x_tilde)
    """

    def __init__(self, group: MatrixLieGroup, energy=None, config: TIEDConfig | None = None) -> None:
        if not isinstance(group, MatrixLieGroup):
            raise TypeError(f"TIEDSampler: group: expected a MatrixLieGroup, got {type(group).__name__}")
        if energy is not None and not callable(energy):
            raise input_error("TIEDSampler", "energy", "a callable from a batch to (B,) or None", type(energy).__name__)
        config = TIEDConfig() if config is None else config
        if not isinstance(config, TIEDConfig):
            raise TypeError(f"TIEDSampler: config: expected a TIEDConfig, got {type(config).__name__}")
        self.group, self.energy, self.config = group, energy, config

    # -- the reverse process -------------------------------------------------------------------
    def _reverse(self, log_density: Callable, N: int, generator: torch.Generator, device, on_step=None) -> torch.Tensor:
        """``N`` chains of the reverse sampler from ``W_K``; ``on_step(g)`` after every step; the final states."""
        c, group = self.config, self.group
        dtype, K, M = c.torch_dtype, c.steps, c.mc_paths
        gam = gamma_schedule(c).to(dtype)
        dt = c.horizon / K
        g = forward_paths(group, (N,), K, c, generator, device)[0][:, -1]
        path_shape = (N, M) if c.per_sample_paths else (M,)
        if c.cache_paths:
            cache_W, cache_l = forward_paths(group, path_shape, K, c, generator, device)
        for i in range(K):
            t = K - i
            if c.cache_paths:
                W, logw = cache_W[..., t - 1, :, :], cache_l[..., t - 1]
            else:
                W, logw = forward_paths(group, path_shape, t, c, generator, device)
                W, logw = W[..., -1, :, :], logw[..., -1]
            score, _ = trivialized_score(group, log_density, g, W, logw, linearize=c.linearize)
            if c.clip is not None:
                norm = score.norm(dim=1, keepdim=True).clamp_min(1e-30)
                score = score * (c.clip / norm).clamp(max=1.0)
            xi = torch.randn(N, group.dim, generator=generator, dtype=dtype).to(device)
            gt = float(gam[t - 1])
            g = g @ group.exp(gt ** 2 * dt * score + gt * math.sqrt(dt) * xi)
            if on_step is not None:
                on_step(g)
        return g

    def sample_density(self, log_density: Callable[[torch.Tensor], torch.Tensor], n: int, *, device=None
                       ) -> torch.Tensor:
        """``n`` raw draws (no selection) from the density ``exp(log_density(g))`` on the group (Haar base).

        ``log_density`` maps ``(N, n, n)`` elements to ``(N,)``.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise input_error("TIEDSampler.sample_density", "n", "an int >= 1", n)
        if not callable(log_density):
            raise input_error("TIEDSampler.sample_density", "log_density", "a callable (N, n, n) -> (N,)",
                              type(log_density).__name__)
        k = self.group.n

        def structured(h):
            out = log_density(h.reshape(-1, k, k))
            if not isinstance(out, torch.Tensor) or out.shape != (h.shape[0] * h.shape[1],):
                raise input_error("TIEDSampler.sample_density", "log_density",
                                  f"a callable returning shape ({h.shape[0] * h.shape[1]},)",
                                  described(f"output {describe(out)}"))
            return out.reshape(h.shape[:2])

        generator = torch.Generator().manual_seed(self.config.seed)
        with torch.no_grad():
            return self._reverse(structured, n, generator, device)

    def sample(self, x_tilde: torch.Tensor) -> TIEDResult:
        """Invert the transformation of each image of ``x_tilde`` ``(B, C, H, W)``: ``H`` chains per input, the
        lowest-energy state over chains and steps (the official pipeline's min-energy selection)."""
        fn = "TIEDSampler.sample"
        if self.energy is None:
            raise input_error(fn, "energy", "an energy given to TIEDSampler", None)
        c, group = self.config, self.group
        x = check_images(x_tilde, group, fn).to(c.torch_dtype)
        B, H = x.shape[0], c.hypotheses
        x_rep = x.repeat_interleave(H, 0)
        generator = torch.Generator().manual_seed(c.seed)

        def log_density(h):  # (BH, M, 3, 3) -> (BH, M)
            return -pulled_back_energy(group, self.energy, x_rep, h, function=fn) / c.temperature

        def energy_now(g):
            with torch.no_grad():
                return pulled_back_energy(group, self.energy, x_rep, g[:, None], function=fn)[:, 0]

        tracker: list[_Tracker] = []

        def on_step(g):
            tracker[0].update(g, energy_now(g))

        # the initial states are W_K; the tracker starts from them (drawn with the same generator state)
        state = generator.get_state()
        g0 = forward_paths(group, (B * H,), c.steps, c, generator, x.device)[0][:, -1]
        generator.set_state(state)
        tracker.append(_Tracker(g0, energy_now(g0)))
        with torch.no_grad():
            self._reverse(log_density, B * H, generator, x.device, on_step)
        return tracker[0].result(B, H, c.energy_evaluations)
