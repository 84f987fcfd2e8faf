"""The one-hidden-layer CNN of "A Theory of Contrastive Learning with Natural Images" (ICML 2026):
``g(x) = A GAP(sigma(w_k (*) x))`` with ``K`` full-size circular filters ``w_k``, a pointwise nonlinearity, global
average pooling and a linear head ``A`` (``d x K``).

Reconstruction (the paper's text is not available): full-size circular filters, so a cyclic shift of the image is
an exact invariance; ``sigma`` is ``square`` (the analysed case), ``relu`` or ``abs``. The circular convolution is
computed by FFT (``path="conv"``). With ``square`` the default path is Parseval's identity,
``GAP((w (*) x)^2) = sum_w |w_hat(w)|^2 |x_hat(w)|^2 / N^4`` (``x_hat = torch.fft.fft2(x)``), one matrix product
instead of ``K`` image-sized convolutions; a test checks both paths agree. In the notation of
:mod:`icml26.eval.tasks.waterfill` the features are ``U z`` with ``z`` the class powers of the image and
``U_kc = sum_{w in c} |w_hat_k(w)|^2 / N^2`` (:meth:`SpectralCNNModel.filter_power`), so the spectral contrastive
loss sees the network only through ``M = (A U)^T (A U)`` (:meth:`SpectralCNNModel.representation_matrix`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from icml26.errors import describe, input_error
from icml26.validation import check_choice, check_finite, check_int

NONLINEARITIES = ("square", "relu", "abs")
PATHS = ("auto", "parseval", "conv")
LOSSES = ("spectral", "info_nce")


class SpectralCNNConfig(PretrainedConfig):
    """Configuration of :class:`SpectralCNNModel`.

    Args:
        image_size: the side ``N`` of the (square, single-channel) images.
        num_filters: ``K``, the number of full-size circular filters.
        embed_dim: ``d``, the embedding dimension (rows of the head ``A``).
        nonlinearity: ``"square"``, ``"relu"`` or ``"abs"``.
        path: ``"auto"`` (Parseval for ``square``, else the FFT convolution), ``"parseval"`` (``square`` only) or
            ``"conv"``.
        loss: the loss ``forward`` returns given a second view: ``"spectral"`` (HaoChen et al. 2021) or
            ``"info_nce"`` (SimCLR's NT-Xent).
        mu: the spectral loss's norm clip (``None``: none; the analysis assumes none).
        info_nce_temperature: InfoNCE's temperature (named so that transformers does not take it for a generation
            parameter).
        filter_std: the standard deviation of the initial filter entries (``None``: ``1 / N``).
    """

    model_type = "icml26_spectral_cnn"

    def __init__(self, image_size: int = 10, num_filters: int = 8, embed_dim: int = 6, nonlinearity: str = "square",
                 path: str = "auto", loss: str = "spectral", mu: float | None = None, info_nce_temperature: float = 0.5,
                 filter_std: float | None = None, **kwargs) -> None:
        fn = "SpectralCNNConfig"
        self.image_size = check_int(fn, "image_size", image_size, low=2)
        self.num_filters = check_int(fn, "num_filters", num_filters, low=1)
        self.embed_dim = check_int(fn, "embed_dim", embed_dim, low=1)
        self.nonlinearity = check_choice(fn, "nonlinearity", nonlinearity, NONLINEARITIES)
        self.path = check_choice(fn, "path", path, PATHS)
        if path == "parseval" and nonlinearity != "square":
            raise input_error(fn, "path", f"'auto' or 'conv' with nonlinearity={nonlinearity!r} (Parseval's path "
                              "holds for 'square' only)", path)
        self.loss = check_choice(fn, "loss", loss, LOSSES)
        self.mu = None if mu is None else check_finite(fn, "mu", mu, positive=True)
        self.info_nce_temperature = check_finite(fn, "info_nce_temperature", info_nce_temperature, positive=True)
        self.filter_std = None if filter_std is None else check_finite(fn, "filter_std", filter_std, positive=True)
        super().__init__(**kwargs)


AutoConfig.register(SpectralCNNConfig.model_type, SpectralCNNConfig, exist_ok=True)


@dataclass
class SpectralCNNOutput(ModelOutput):
    """``loss`` (given a second view), ``embeddings`` ``[B, d]`` and ``features`` ``[B, K]`` (before the head) of
    the first view, ``embeddings_2`` of the second."""

    loss: torch.Tensor | None = None
    embeddings: torch.Tensor | None = None
    embeddings_2: torch.Tensor | None = None
    features: torch.Tensor | None = None


class SpectralCNNModel(PreTrainedModel):
    """``g(x) = A GAP(sigma(w_k (*) x))``: see the module docstring and :class:`SpectralCNNConfig`."""

    config_class = SpectralCNNConfig
    base_model_prefix = ""
    main_input_name = "pixel_values"

    def __init__(self, config: SpectralCNNConfig) -> None:
        super().__init__(config)
        n, k = config.image_size, config.num_filters
        self.filters = nn.Parameter(torch.empty(k, n, n))
        self.head = nn.Linear(k, config.embed_dim, bias=False)
        self.post_init()

    def _init_weights(self, module) -> None:
        if module is self:
            std = self.config.filter_std or 1.0 / self.config.image_size
            nn.init.normal_(self.filters, 0.0, std)
        elif isinstance(module, nn.Linear):
            nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5))

    # ------------------------------------------------------------------------------------------
    def _images(self, pixel_values, name: str) -> torch.Tensor:
        n = self.config.image_size
        x = pixel_values
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise input_error("SpectralCNNModel", name, f"a float tensor [B, {n}, {n}] or [B, 1, {n}, {n}]",
                              describe(x))
        if x.ndim == 4 and x.shape[1] == 1:
            x = x[:, 0]
        if x.ndim != 3 or x.shape[1:] != (n, n):
            raise input_error("SpectralCNNModel", name, f"a float tensor [B, {n}, {n}] or [B, 1, {n}, {n}] "
                              f"(square images of image_size = {n})", describe(pixel_values))
        return x.to(self.filters.dtype)

    def image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """``[B, K]``: ``GAP(sigma(w_k (*) x))`` for each filter, by the configured path."""
        x = self._images(pixel_values, "pixel_values")
        n = self.config.image_size
        path = self.config.path
        if path == "auto":
            path = "parseval" if self.config.nonlinearity == "square" else "conv"
        if path == "parseval":
            px = torch.fft.fft2(x).abs().square().reshape(len(x), -1)
            pw = torch.fft.fft2(self.filters).abs().square().reshape(len(self.filters), -1)
            return px @ pw.T / n ** 4
        y = torch.fft.ifft2(torch.fft.fft2(x)[:, None] * torch.fft.fft2(self.filters)[None]).real
        y = {"square": torch.square, "relu": torch.relu, "abs": torch.abs}[self.config.nonlinearity](y)
        return y.mean(dim=(-2, -1))

    def forward(self, pixel_values: torch.Tensor, pixel_values_2: torch.Tensor | None = None,
                return_dict: bool | None = None, **kwargs) -> SpectralCNNOutput:
        """Embed ``pixel_values``; with ``pixel_values_2`` (a second view of the same images) also the loss.

        Args:
            pixel_values: ``[B, N, N]`` or ``[B, 1, N, N]`` float images.
            pixel_values_2: the second views, same shape (optional).
            return_dict: ``False`` returns a tuple.
        """
        features = self.image_features(pixel_values)
        z1 = self.head(features)
        z2 = loss = None
        if pixel_values_2 is not None:
            if not isinstance(pixel_values_2, torch.Tensor) or pixel_values_2.shape != pixel_values.shape:
                raise input_error("SpectralCNNModel", "pixel_values_2", f"a tensor of shape {tuple(pixel_values.shape)}"
                                  " (as pixel_values)", describe(pixel_values_2))
            from icml26.training.waterfill import info_nce_loss, spectral_contrastive_loss

            z2 = self.head(self.image_features(pixel_values_2))
            loss = (spectral_contrastive_loss(z1, z2, mu=self.config.mu) if self.config.loss == "spectral"
                    else info_nce_loss(z1, z2, temperature=self.config.info_nce_temperature))
        out = SpectralCNNOutput(loss=loss, embeddings=z1, embeddings_2=z2, features=features)
        return out if return_dict is not False else out.to_tuple()

    # ------------------------------------------------------------------------------------------
    def _classes(self):
        from icml26.eval.tasks.waterfill import frequency_classes

        return frequency_classes(self.config.image_size)

    @torch.no_grad()
    def filter_power(self) -> np.ndarray:
        """``U`` ``[K, C]``: each filter's power ``sum_{w in c} |w_hat_k(w)|^2 / N^2`` in each frequency class."""
        n = self.config.image_size
        power = torch.fft.fft2(self.filters.detach().double().cpu()).abs().square().numpy() / n ** 2
        return self._classes().of_grid(power, reduce="sum")

    @torch.no_grad()
    def top_pair_energy(self) -> np.ndarray:
        """``[K]``: the share of each filter's energy in its strongest frequency class (a conjugate pair; 1 for a
        pure sinusoid)."""
        U = self.filter_power()
        return U.max(1) / np.maximum(U.sum(1), 1e-300)

    @torch.no_grad()
    def representation_matrix(self) -> np.ndarray:
        """``M = (A U)^T (A U)`` ``[C, C]``: all that the spectral loss identifies (``square`` nonlinearity)."""
        AU = self.head.weight.detach().double().cpu().numpy() @ self.filter_power()
        return AU.T @ AU

    @classmethod
    def from_solution(cls, solution, tol: float = 1e-12, **config_kwargs) -> SpectralCNNModel:
        """The network that realises a :class:`~icml26.eval.tasks.waterfill.WaterfillSolution`: one sinusoid per
        frequency class the solution uses (amplitude giving unit class power), a constant filter for the DC class,
        and the head ``A = sqrt(weights) V^T`` on those classes, so ``representation_matrix()`` equals ``M*``.
        The model is float64 (``.float()`` casts it).

        Args:
            solution: the output of :func:`~icml26.eval.tasks.waterfill.waterfill` (with ``classes``).
            tol: classes whose row of ``M*`` is below ``tol`` times the largest are left out.
            config_kwargs: other :class:`SpectralCNNConfig` fields (``nonlinearity`` must stay ``square``).
        """
        classes = getattr(solution, "classes", None)
        if classes is None:
            raise input_error("SpectralCNNModel.from_solution", "solution", "a WaterfillSolution computed with "
                              "classes=... (so it knows N)", type(solution).__name__)
        tol = check_finite("SpectralCNNModel.from_solution", "tol", tol, non_negative=True)
        n = classes.n
        rows = np.abs(solution.M).max(1)
        used = np.flatnonzero(rows > tol * rows.max())
        config = SpectralCNNConfig(image_size=n, num_filters=len(used), embed_dim=solution.d, **config_kwargs)
        model = cls(config).to(torch.float64)  # float64: M equals M* to rounding
        p = np.stack(np.meshgrid(np.arange(n), np.arange(n), indexing="ij"), -1)
        filters = []
        for c in used:
            k = classes.representatives[c]
            amp = (1.0 if classes.self_conjugate[c] else math.sqrt(2.0)) / n
            filters.append(amp * np.cos(2 * math.pi * (p @ k) / n))
        V = solution.modes[:, :solution.d][used]
        head = (V * np.sqrt(solution.weights)).T
        with torch.no_grad():
            model.filters.copy_(torch.as_tensor(np.stack(filters)))
            model.head.weight.copy_(torch.as_tensor(head))
        return model


AutoModel.register(SpectralCNNConfig, SpectralCNNModel, exist_ok=True)
