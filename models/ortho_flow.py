"""Orthogonality-regularised normalizing flow ("Unsupervised Disentanglement Without Compromises: How Functional
Orthogonality Enforces Identifiability", ICML 2026, arXiv 2606.21385).

The paper's claim: a generator whose Jacobian has orthogonal columns on a product domain is identifiable up to
permutation and per-factor reparametrisation, whatever the latent density. The estimator is a RECONSTRUCTION after
the IMA code (Gresele et al. NeurIPS 2021, lgresele/independent-mechanism-analysis,
``experiments/train_residual_moeb.py``): a flow ``f: x -> z`` trained by likelihood plus ``lambda_orth`` times an
orthogonality penalty on the generator Jacobian ``J_g = J_f^-1`` (:mod:`icml26.training.ortho_flow`), under a base
density that does not force independence (a learnable full-covariance Gaussian, or a zuko MAF for non-Gaussian
dependence; ``base="standard_normal"`` is IMA proper, which assumes independent factors).

The flow: a learnable linear layer (initialised to the identity) followed by ``num_couplings`` affine couplings
(RealNVP, Dinh et al. 2017) alternating which half of the coordinates they transform; each conditioner is two tanh
layers of ``hidden`` units and a zero-initialised output, and the log-scales are bounded,
``s = bound tanh(s_raw / bound)``. With ``jacobian="forward"`` the ``d`` tangent vectors of ``J_f`` ride through the
same pass as the data (exact, one pass instead of ``d``); ``"func"`` uses ``torch.func.vmap(jacfwd(encode))`` (any
transform, e.g. a zuko flow through :meth:`OrthoFlowModel.from_zuko`); ``"hutchinson"`` estimates the penalty with
random probes through the decoder's JVP and VJP (its diagonal still takes ``d`` decoder JVPs, so with this flow's
decoder it is the slowest path; it suits generators with cheap JVPs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from icml26.errors import describe, input_error
from icml26.validation import check_choice, check_finite, check_int

BASES = ("full_cov_gaussian", "standard_normal", "maf")
PENALTIES = ("cima", "cosine", "offdiag_fro")
JACOBIANS = ("forward", "func", "hutchinson")


class OrthoFlowConfig(PretrainedConfig):
    """Configuration of :class:`OrthoFlowModel`.

    Args:
        dim: the data (and latent) dimension ``d``.
        num_couplings: affine coupling layers.
        hidden: width of the two tanh layers of each conditioner.
        log_scale_bound: the bound of each coupling's log-scale.
        base: ``"full_cov_gaussian"`` (learnable mean and Cholesky factor: factors may be dependent),
            ``"standard_normal"`` (N(0, I): IMA's independence assumption) or ``"maf"`` (a zuko masked
            autoregressive flow over the latents: any dependence, for non-Gaussian copulas).
        penalty: ``"cima"`` (IMA's contrast), ``"cosine"`` (normalised squared cosines) or ``"offdiag_fro"``
            (OroJaR's unnormalised off-diagonal energy); with ``jacobian="hutchinson"`` the penalty is the
            normalised off-diagonal energy estimated by probes.
        lambda_orth: the penalty's weight (>= 0; 0 is plain maximum likelihood).
        warmup_steps: the weight ramps linearly from 0 over this many training-mode forward passes (IMA's
            ``cima_warmup``; 0: none).
        jacobian: ``"forward"``, ``"func"`` or ``"hutchinson"`` (see the module docstring).
        n_probes: Rademacher probes of the Hutchinson estimate.
        base_transforms: autoregressive transforms of the ``"maf"`` base (each with two hidden layers of
            ``hidden`` units).
    """

    model_type = "icml26_ortho_flow"

    def __init__(self, dim: int = 2, num_couplings: int = 8, hidden: int = 64, log_scale_bound: float = 2.0,
                 base: str = "full_cov_gaussian", penalty: str = "cima", lambda_orth: float = 1.0,
                 warmup_steps: int = 0, jacobian: str = "forward", n_probes: int = 1, base_transforms: int = 2,
                 **kwargs) -> None:
        fn = "OrthoFlowConfig"
        self.dim = check_int(fn, "dim", dim, low=2)
        self.num_couplings = check_int(fn, "num_couplings", num_couplings, low=0)
        self.hidden = check_int(fn, "hidden", hidden, low=1)
        self.log_scale_bound = check_finite(fn, "log_scale_bound", log_scale_bound, positive=True)
        self.base = check_choice(fn, "base", base, BASES)
        self.penalty = check_choice(fn, "penalty", penalty, PENALTIES)
        self.lambda_orth = check_finite(fn, "lambda_orth", lambda_orth, non_negative=True)
        self.warmup_steps = check_int(fn, "warmup_steps", warmup_steps, low=0)
        self.jacobian = check_choice(fn, "jacobian", jacobian, JACOBIANS)
        self.n_probes = check_int(fn, "n_probes", n_probes, low=1)
        self.base_transforms = check_int(fn, "base_transforms", base_transforms, low=1)
        super().__init__(**kwargs)


AutoConfig.register(OrthoFlowConfig.model_type, OrthoFlowConfig, exist_ok=True)


@dataclass
class OrthoFlowOutput(ModelOutput):
    """``loss = nll + lambda * penalty`` (batch means; ``nll`` in nats per sample, summed over dimensions),
    ``latents`` ``z = f(x)`` and ``log_det`` ``log|det J_f(x)|`` per sample."""

    loss: torch.Tensor | None = None
    nll: torch.Tensor | None = None
    penalty: torch.Tensor | None = None
    latents: torch.Tensor | None = None
    log_det: torch.Tensor | None = None


class AffineCoupling(nn.Module):
    """``y[trans] = x[trans] exp(s(x[cond])) + t(x[cond])``, ``y[cond] = x[cond]``; tangents carried exactly.

    Args:
        dim: the dimension.
        cond: indices the conditioner reads.
        hidden: conditioner width.
        bound: log-scale bound.
    """

    def __init__(self, dim: int, cond: list[int], hidden: int, bound: float) -> None:
        super().__init__()
        trans = [i for i in range(dim) if i not in cond]
        if cond != list(range(min(cond), max(cond) + 1)) or min(cond) not in (0, len(trans)):
            raise input_error("AffineCoupling", "cond", "a leading or trailing block of indices", cond)
        # slices, not index buffers: a contiguous half reads without a gather, and nothing needs restoring on load
        self.cond, self.trans = (slice(0, len(cond)), slice(len(cond), dim)) if min(cond) == 0 else \
            (slice(len(trans), dim), slice(0, len(trans)))
        self.cond_first = min(cond) == 0
        self.bound = bound
        self.l1, self.l2 = nn.Linear(len(cond), hidden), nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 2 * len(trans))
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def _params(self, x1):
        a1 = torch.tanh(self.l1(x1))
        a2 = torch.tanh(self.l2(a1))
        raw, t = self.out(a2).chunk(2, dim=-1)
        s = self.bound * torch.tanh(raw / self.bound)
        return s, t, (a1, a2, raw)

    def forward(self, x, tangents=None):
        """``(y, log_det, tangents)``; ``tangents`` ``[B, d, d]`` is ``dx/d(input)`` (``None``: not carried)."""
        x1, x2 = x[:, self.cond], x[:, self.trans]
        s, t, (a1, a2, raw) = self._params(x1)
        e = s.exp()
        y2 = x2 * e + t
        y = self._join(x1, y2)
        if tangents is None:
            return y, s.sum(1), None
        d1, d2 = tangents[:, self.cond], tangents[:, self.trans]                   # [B, c, d], [B, m, d]
        da1 = (1 - a1 ** 2)[..., None] * torch.matmul(self.l1.weight, d1)          # [B, h, d]
        da2 = (1 - a2 ** 2)[..., None] * torch.matmul(self.l2.weight, da1)
        dout = torch.matmul(self.out.weight, da2)                                   # [B, 2m, d]
        draw, dt = dout.chunk(2, dim=1)
        ds = (1 - torch.tanh(raw / self.bound) ** 2)[..., None] * draw
        dy2 = e[..., None] * d2 + (x2 * e)[..., None] * ds + dt
        return y, s.sum(1), self._join(d1, dy2)

    def _join(self, kept, changed):
        return torch.cat([kept, changed] if self.cond_first else [changed, kept], dim=1)

    def inverse(self, y):
        y1, y2 = y[:, self.cond], y[:, self.trans]
        s, t, _ = self._params(y1)
        return self._join(y1, (y2 - t) * (-s).exp())


class OrthoFlowModel(PreTrainedModel):
    """The orthogonality-regularised flow: see the module docstring and :class:`OrthoFlowConfig`."""

    config_class = OrthoFlowConfig
    base_model_prefix = ""
    main_input_name = "x"

    def __init__(self, config: OrthoFlowConfig) -> None:
        super().__init__(config)
        d = config.dim
        self.linear = nn.Parameter(torch.eye(d))
        self.shift = nn.Parameter(torch.zeros(d))
        half = [list(range(d // 2)), list(range(d // 2, d))]
        self.couplings = nn.ModuleList(AffineCoupling(d, half[k % 2], config.hidden, config.log_scale_bound)
                                       for k in range(config.num_couplings))
        self.base_mean = nn.Parameter(torch.zeros(d), requires_grad=config.base == "full_cov_gaussian")
        self.base_tril = nn.Parameter(torch.zeros(d, d), requires_grad=config.base == "full_cov_gaussian")
        if config.base == "maf":
            import zuko

            # zuko builds its autoregressive masks with torch.unique, which has no meta kernel: built on the CPU
            # even inside from_pretrained's meta-device context, then loaded like any other weight
            with torch.device("cpu"):
                self.base_flow = zuko.flows.MAF(d, transforms=config.base_transforms,
                                                hidden_features=(config.hidden, config.hidden))
        self.register_buffer("num_updates", torch.zeros((), dtype=torch.long))
        self._external = None
        self.post_init()

    def _init_weights(self, module) -> None:
        if module is self:
            with torch.no_grad():
                self.linear.copy_(torch.eye(self.config.dim))
                self.shift.zero_()
                self.base_mean.zero_()
                self.base_tril.zero_()
        elif isinstance(module, AffineCoupling):
            for layer in (module.l1, module.l2):
                nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5))
                bound = 1 / math.sqrt(layer.weight.shape[1])
                nn.init.uniform_(layer.bias, -bound, bound)
            nn.init.zeros_(module.out.weight)
            nn.init.zeros_(module.out.bias)

    # ------------------------------------------------------------------------------------------
    def _check(self, x, name: str = "x") -> torch.Tensor:
        d = self.config.dim
        if not isinstance(x, torch.Tensor) or x.ndim != 2 or x.shape[1] != d or not x.is_floating_point():
            raise input_error("OrthoFlowModel", name, f"a float tensor [B, {d}] (dim = {d})", describe(x))
        if x.device.type == "cpu" and not torch.isfinite(x).all():
            raise input_error("OrthoFlowModel", name, "finite values", "non-finite values")
        return x.to(self.linear.dtype)

    def _encode(self, x, tangents=None):
        if self._external is not None:
            z, log_det = self._external_encode(x)
            return z, log_det, None
        h = x @ self.linear.T + self.shift
        log_det = torch.linalg.slogdet(self.linear)[1].expand(len(x))
        if tangents is not None:
            tangents = torch.matmul(self.linear, tangents)
        for layer in self.couplings:
            h, ld, tangents = layer(h, tangents)
            log_det = log_det + ld
        return h, log_det, tangents

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """``z = f(x)``, ``[B, d]``."""
        return self._encode(self._check(x))[0]

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``x = g(z) = f^-1(z)``, ``[B, d]``."""
        z = self._check(z, "z")
        if self._external is not None:
            return self._external.inv(z)
        for layer in reversed(self.couplings):
            z = layer.inverse(z)
        return torch.linalg.solve(self.linear, (z - self.shift).T).T

    def flow_jacobian(self, x: torch.Tensor, method: str | None = None) -> torch.Tensor:
        """``J_f(x)`` ``[B, d, d]`` (rows: outputs), by ``method`` (``"forward"`` or ``"func"``; default: the
        config's, with ``"hutchinson"`` falling back to ``"forward"``)."""
        x = self._check(x)
        method = method or ("forward" if self.config.jacobian == "hutchinson" else self.config.jacobian)
        check_choice("OrthoFlowModel.flow_jacobian", "method", method, ("forward", "func"))
        if method == "forward" and self._external is None:
            eye = torch.eye(self.config.dim, dtype=x.dtype, device=x.device).expand(len(x), -1, -1)
            return self._encode(x, eye)[2]
        single = lambda v: self._encode(v[None])[0][0]
        return torch.func.vmap(torch.func.jacfwd(single))(x)

    # ------------------------------------------------------------------------------------------
    def base_log_prob(self, z: torch.Tensor) -> torch.Tensor:
        """``log p(z)`` per sample under the base density."""
        d = self.config.dim
        if self.config.base == "standard_normal":
            return -0.5 * (z ** 2).sum(1) - 0.5 * d * math.log(2 * math.pi)
        if self.config.base == "maf":
            return self.base_flow().log_prob(z)
        L = self.base_scale_tril()
        white = torch.linalg.solve_triangular(L, (z - self.base_mean).T, upper=False).T
        return -0.5 * (white ** 2).sum(1) - torch.log(torch.diagonal(L)).sum() - 0.5 * d * math.log(2 * math.pi)

    def base_scale_tril(self) -> torch.Tensor:
        """The base's Cholesky factor (identity for ``"standard_normal"``; a Gaussian base only)."""
        if self.config.base == "maf":
            raise input_error("OrthoFlowModel.base_scale_tril", "config.base", "a Gaussian base", "maf")
        if self.config.base == "standard_normal":
            return torch.eye(self.config.dim, dtype=self.linear.dtype, device=self.linear.device)
        return torch.tril(self.base_tril, -1) + torch.diag(torch.exp(torch.diagonal(self.base_tril)))

    def base_correlation(self) -> torch.Tensor:
        """The base's correlation matrix (the dependence the model allows between factors)."""
        L = self.base_scale_tril()
        cov = L @ L.T
        s = torch.sqrt(torch.diagonal(cov))
        return cov / s[:, None] / s[None, :]

    def penalty_weight(self) -> float:
        """``lambda_orth`` after the warm-up ramp at the current ``num_updates``."""
        c = self.config
        if c.warmup_steps == 0:
            return c.lambda_orth
        return c.lambda_orth * min(1.0, float(self.num_updates) / c.warmup_steps)

    def forward(self, x: torch.Tensor, return_dict: bool | None = None, **kwargs) -> OrthoFlowOutput:
        """Latents, NLL and the penalty of a batch; ``loss = nll + lambda * penalty``.

        Args:
            x: ``[B, dim]`` float data.
            return_dict: ``False`` returns a tuple.
        """
        from icml26.training.ortho_flow import PENALTY_FUNCTIONS, hutchinson_offdiag

        x = self._check(x)
        c = self.config
        weight = self.penalty_weight()
        need = weight > 0 or not self.training
        if need and c.jacobian == "forward" and self._external is None:
            eye = torch.eye(c.dim, dtype=x.dtype, device=x.device).expand(len(x), -1, -1)
            z, log_det, J = self._encode(x, eye)
        else:
            z, log_det, J = self._encode(x)
        nll = -(self.base_log_prob(z) + log_det).mean()
        penalty = torch.zeros((), dtype=nll.dtype, device=nll.device)
        if need:
            if c.jacobian == "hutchinson":
                penalty = hutchinson_offdiag(*self._generator_products(z), n_probes=c.n_probes)
            else:
                if J is None:
                    J = self.flow_jacobian(x, "func")
                penalty = PENALTY_FUNCTIONS[c.penalty](J).mean()
        if self.training:
            self.num_updates += 1
        loss = nll + weight * penalty if weight > 0 else nll
        out = OrthoFlowOutput(loss=loss, nll=nll, penalty=penalty, latents=z, log_det=log_det)
        return out if return_dict is not False else out.to_tuple()

    def _generator_products(self, z):
        """``(jvp, vjp, diag)`` of the generator ``g = f^-1`` at the latents ``z`` (batched), for Hutchinson."""
        decode = self.decode if self._external is None else self._external.inv
        zz = z.detach().requires_grad_(False)

        def jvp(v):
            return torch.func.jvp(decode, (zz,), (v,))[1]

        def vjp(u):
            return torch.func.vjp(decode, zz)[1](u)[0]

        eye = torch.eye(self.config.dim, dtype=z.dtype, device=z.device)
        diag = torch.stack([jvp(e.expand_as(z)).pow(2).sum(1) for e in eye], 1)
        return jvp, vjp, diag

    # ------------------------------------------------------------------------------------------
    @classmethod
    def from_zuko(cls, flow, **config_kwargs) -> OrthoFlowModel:
        """Wrap a zuko flow (``zuko.flows.Flow``, whose ``transform()`` maps data to latents, or a
        ``zuko.transforms`` transform) as the encoder; its Jacobian is taken with ``torch.func``
        (``jacobian="func"``), its log-det is the transform's own.

        Args:
            flow: the zuko flow or transform.
            config_kwargs: other :class:`OrthoFlowConfig` fields (``dim`` is required).

        The wrapped model trains and evaluates like any other; ``save_pretrained`` stores its weights, but
        ``from_pretrained`` cannot rebuild the zuko flow: save the zuko flow's ``state_dict`` yourself.
        """
        if "dim" not in config_kwargs:
            raise input_error("OrthoFlowModel.from_zuko", "dim", "the data dimension (an int >= 2)", None)
        config_kwargs.setdefault("jacobian", "func")
        if config_kwargs["jacobian"] == "forward":
            raise input_error("OrthoFlowModel.from_zuko", "jacobian", "'func' or 'hutchinson' (tangents are not "
                              "carried through a zuko transform)", "forward")
        model = cls(OrthoFlowConfig(num_couplings=0, **config_kwargs))
        if isinstance(flow, nn.Module):
            model.zuko_flow = flow  # a submodule: its parameters train with the model
        model._external = _ZukoTransform(flow)
        return model

    def _external_encode(self, x):
        transform = self._external.get()
        z, ladj = transform.call_and_ladj(x)
        return z, ladj


class _ZukoTransform:
    """The data-to-latent transform of a zuko flow (rebuilt per call, as zuko's lazy transforms are)."""

    def __init__(self, flow) -> None:
        self.flow = flow

    def get(self):
        return self.flow.transform() if callable(getattr(self.flow, "transform", None)) else self.flow

    def inv(self, z):
        return self.get().inv(z)


AutoModel.register(OrthoFlowConfig, OrthoFlowModel, exist_ok=True)
