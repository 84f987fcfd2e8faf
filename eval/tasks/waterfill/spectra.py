"""Contrastive waterfilling (ICML 2026, "A Theory of Contrastive Learning with Natural Images"): frequency classes,
the second moments of view powers, the closed-form optimum and the images it is measured on.

The paper's text is not available; what follows is a RECONSTRUCTION from its abstract, written so that every
quantity is checkable (``tests/test_waterfill.py``):

- **Frequency classes.** An ``N x N`` real image's DFT ``x_hat = fft2(x)`` satisfies ``x_hat(-w) = conj(x_hat(w))``,
  so its power is a function of the class ``{w, -w}`` (indices mod ``N``). :func:`frequency_classes` lists the
  classes (the DC class and, for even ``N``, the other self-conjugate ones included) with ``|k|^2`` of the
  representative nearest zero; a **shell** is the set of classes of one ``|k|^2``. The class power of an image is
  ``z_c = |x_hat(w)|^2 / N^2`` (:func:`class_powers`).
- **Moments.** A view is ``v = x + n``, ``n ~ N(0, sigma2 I)``; two views share ``x``. For a Gaussian stationary
  image with ``S(w) = E|x_hat(w)|^2 / N^2`` (:func:`gaussian_moments`) the class powers of different classes are
  independent, with mean ``mu_c = S_c + sigma2``, variance ``mu_c^2`` and positive-pair covariance ``S_c^2`` (both
  doubled at self-conjugate classes, where ``x_hat`` is real). ``Q_plus = diag(cov_plus) + mu mu^T`` and
  ``R = diag(var) + mu mu^T`` are ``E[z(v1) z(v2)^T]`` and ``E[z(v) z(v)^T]``. :func:`monte_carlo_moments` estimates
  the same two matrices from any view pairs (natural images), with no Gaussian assumption.
- **The optimum.** A one-hidden-layer CNN with squared activations has features ``U z`` (``U_kc`` the filter power
  in class ``c``, :meth:`icml26.models.waterfill.SpectralCNNModel.filter_power`), so under the spectral contrastive
  loss (HaoChen et al. 2021, arXiv 2106.04156) its population loss depends on ``M = (A U)^T (A U)`` only:
  ``L(M) = -2 tr(M Q_plus) + tr(M R M R)`` (:func:`population_loss`). Over all PSD ``M`` of rank <= d the minimum is
  the top-d part of the generalized eigenproblem ``Q_plus u = lambda R u`` (:func:`waterfill`):
  ``L* = -sum_{i <= d} lambda_i^2``, ``M* = sum_i lambda_i u_i u_i^T`` with ``u^T R u = 1``. No network beats it
  (its ``M`` lies in that set), which is the negative control of the tests.
- **Frequency contrast.** A vector ``u`` on one shell with ``mu^T u = 0`` is an eigenvector with eigenvalue
  ``(S_c / (S_c + sigma2))^2``: a shell of ``m`` classes gives ``m - 1`` such modes, and its features are powers
  divided by ``S + sigma2`` (partial whitening). Noise lowers these eigenvalues most where ``S`` is small, so the
  selected band moves to lower frequencies.
- **The water level.** Top-d is the paper's "selection" as a rank cap. ``level=gamma`` is the other documented
  option: eigen-weights ``(lambda_i - gamma)_+`` instead of ``lambda_i``, the exact minimiser of
  ``L(M) + 2 gamma tr(M R)`` (``tr(M R) = E||g(v)||^2``, a feature-norm penalty): every mode above the level, with
  weights falling to zero at it. The paper's own waterfilling formula is unknown.

:func:`inverse_power_spectrum` is the synthetic setting's spectrum (``1 / (|k|^2 + offset)``, zero DC); the images
themselves are in :mod:`icml26.eval.tasks.waterfill.images`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from icml26.errors import describe, input_error
from icml26.validation import check_finite, check_int

__all__ = ["FrequencyClasses", "Moments", "WaterfillSolution", "BestHead", "frequency_classes", "class_powers",
           "inverse_power_spectrum", "gaussian_moments", "monte_carlo_moments", "waterfill", "population_loss",
           "best_head", "best_head_loss", "class_weights", "shell_weights"]


# ----------------------------------------------------------------------------------------------
# frequency classes
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FrequencyClasses:
    """The frequencies of an ``N x N`` grid modulo conjugation.

    Attributes:
        n: the image size ``N``.
        representatives: ``[C, 2]`` int array, one frequency ``(k1, k2)`` per class, each component in
            ``(-N/2, N/2]``, the DC class first; classes sorted by ``|k|^2`` then by representative.
        k2: ``[C]`` the squared radius ``|k|^2`` of each class.
        self_conjugate: ``[C]`` bool, ``w == -w`` (mod N): the DC class and, for even ``N``, the Nyquist ones.
        index: ``[N, N]`` int array, the class of each DFT index (``fft2`` order).
    """

    n: int
    representatives: np.ndarray
    k2: np.ndarray
    self_conjugate: np.ndarray
    index: np.ndarray

    @property
    def size(self) -> int:
        """The number of classes ``C``."""
        return len(self.k2)

    @property
    def multiplicity(self) -> np.ndarray:
        """``[C]`` the number of DFT indices in each class (1 for a self-conjugate class, else 2)."""
        return np.where(self.self_conjugate, 1, 2)

    def shells(self) -> dict[int, np.ndarray]:
        """``{|k|^2: class indices}``, the classes of each radius, in increasing ``|k|^2``."""
        return {int(r): np.flatnonzero(self.k2 == r) for r in np.unique(self.k2)}

    def on_grid(self, per_class: np.ndarray) -> np.ndarray:
        """``[..., N, N]``: a ``[..., C]`` per-class array spread onto the DFT grid (both members of a class)."""
        return np.asarray(per_class)[..., self.index]

    def of_grid(self, grid: np.ndarray, reduce: str = "first") -> np.ndarray:
        """``[..., C]``: a ``[..., N, N]`` grid array read at each class (``reduce="first"``: the representative,
        ``"sum"``: summed over the class members)."""
        grid = np.asarray(grid)
        flat = grid.reshape(*grid.shape[:-2], -1)
        if reduce == "first":
            rep = (self.representatives[:, 0] % self.n) * self.n + self.representatives[:, 1] % self.n
            return flat[..., rep]
        return np.stack([flat[..., m].sum(-1) for m in self._members()], -1)

    def _members(self) -> list[np.ndarray]:
        flat = self.index.reshape(-1)
        order = np.argsort(flat, kind="stable")
        bounds = np.searchsorted(flat[order], np.arange(self.size + 1))
        return [order[bounds[c]:bounds[c + 1]] for c in range(self.size)]


def _centred(k: np.ndarray, n: int) -> np.ndarray:
    """Indices mod ``n`` mapped into ``(-n/2, n/2]``."""
    k = np.mod(k, n)
    return np.where(k > n // 2, k - n, k)


def frequency_classes(n: int) -> FrequencyClasses:
    """The frequency classes of ``n x n`` images (see :class:`FrequencyClasses`).

    Args:
        n: the image size ``N`` (>= 2).
    """
    n = check_int("frequency_classes", "n", n, low=2)
    k1, k2 = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    c1, c2 = _centred(k1, n), _centred(k2, n)
    radius = c1 ** 2 + c2 ** 2
    index = -np.ones((n, n), dtype=np.int64)
    reps, radii, selfc = [], [], []
    # visit the grid by radius, then by the centred representative, so class order is reproducible
    order = sorted(((int(radius[a, b]), int(c1[a, b]), int(c2[a, b]), a, b) for a in range(n) for b in range(n)),
                   key=lambda t: (t[0], -t[1], -t[2]))
    for r, r1, r2, a, b in order:
        if index[a, b] >= 0:
            continue
        ca, cb = (-a) % n, (-b) % n
        c = len(reps)
        index[a, b] = index[ca, cb] = c
        reps.append((r1, r2))
        radii.append(r)
        selfc.append((ca, cb) == (a, b))
    return FrequencyClasses(n, np.array(reps, dtype=np.int64), np.array(radii, dtype=np.int64),
                            np.array(selfc, dtype=bool), index)


def class_powers(images, classes: FrequencyClasses | None = None) -> np.ndarray:
    """``z_c = |x_hat(w_c)|^2 / N^2`` for each image and class, ``x_hat = fft2(x)``.

    Args:
        images: ``[..., N, N]`` real array (numpy or anything ``np.asarray`` takes).
        classes: the classes of ``N`` (default: :func:`frequency_classes` of the images' size).

    Returns:
        ``[..., C]`` float64 array.
    """
    x = _images("class_powers", "images", images)
    n = x.shape[-1]
    classes = classes or frequency_classes(n)
    if classes.n != n:
        raise input_error("class_powers", "classes", f"the classes of N = {n}", f"the classes of N = {classes.n}")
    power = np.abs(np.fft.fft2(x)) ** 2 / n ** 2
    return classes.of_grid(power)


def _images(function: str, argument: str, images) -> np.ndarray:
    x = np.asarray(images, dtype=np.float64) if not hasattr(images, "detach") else images.detach().cpu().double().numpy()
    if x.ndim < 2 or x.shape[-1] != x.shape[-2] or x.shape[-1] < 2:
        raise input_error(function, argument, "real images of shape [..., N, N] with N >= 2", describe(images))
    if not np.isfinite(x).all():
        raise input_error(function, argument, "finite values", "non-finite values")
    return x


# ----------------------------------------------------------------------------------------------
# spectra and moments
# ----------------------------------------------------------------------------------------------
def inverse_power_spectrum(n: int, offset: float = 0.5, dc: float = 0.0) -> np.ndarray:
    """``S(k) = 1 / (|k|^2 + offset)`` on the ``n x n`` DFT grid (``|k|`` of the centred index), ``S(0) = dc``.

    Args:
        n: the image size.
        offset: the positive constant under the radius.
        dc: the power at the zero frequency (0: zero-mean images).
    """
    n = check_int("inverse_power_spectrum", "n", n, low=2)
    offset = check_finite("inverse_power_spectrum", "offset", offset, positive=True)
    dc = check_finite("inverse_power_spectrum", "dc", dc, non_negative=True)
    k1, k2 = np.meshgrid(_centred(np.arange(n), n), _centred(np.arange(n), n), indexing="ij")
    S = 1.0 / (k1 ** 2 + k2 ** 2 + offset)
    S[0, 0] = dc
    return S


@dataclass(frozen=True)
class Moments:
    """Second moments of view powers: ``Q_plus = E[z(v1) z(v2)^T]`` (positive pairs), ``R = E[z z^T]``.

    Attributes:
        Q_plus: ``[C, C]`` symmetric.
        R: ``[C, C]`` symmetric positive definite.
        mean: ``[C]`` the mean class power of a view.
        classes: the frequency classes the rows index.
        pairs: how many view pairs estimated them (0: the Gaussian closed form).
    """

    Q_plus: np.ndarray
    R: np.ndarray
    mean: np.ndarray
    classes: FrequencyClasses
    pairs: int = 0


def _spectrum(function: str, S) -> np.ndarray:
    S = np.asarray(S, dtype=np.float64)
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] < 2:
        raise input_error(function, "S", "an N x N power spectrum with N >= 2", describe(S))
    if not np.isfinite(S).all() or (S < 0).any():
        raise input_error(function, "S", "finite non-negative powers", f"min {np.nanmin(S):g}, "
                          f"{int((~np.isfinite(S)).sum())} non-finite")
    n = S.shape[0]
    if not np.allclose(S, S[(-np.arange(n)) % n][:, (-np.arange(n)) % n], rtol=1e-9, atol=0):
        raise input_error(function, "S", "a conjugate-symmetric spectrum (S(w) = S(-w), as a real image's)",
                          "an asymmetric array")
    return S


def gaussian_moments(S, sigma2: float) -> Moments:
    """The moments of view powers for Gaussian stationary images with spectrum ``S`` and white noise ``sigma2``.

    Args:
        S: ``[N, N]`` expected power ``E|x_hat(w)|^2 / N^2`` on the DFT grid, conjugate-symmetric, >= 0.
        sigma2: the variance of the additive white noise of each view (>= 0).
    """
    S = _spectrum("gaussian_moments", S)
    sigma2 = check_finite("gaussian_moments", "sigma2", sigma2, non_negative=True)
    classes = frequency_classes(S.shape[0])
    s = classes.of_grid(S)
    mu = s + sigma2
    double = np.where(classes.self_conjugate, 2.0, 1.0)
    var, cov = double * mu ** 2, double * s ** 2
    outer = np.outer(mu, mu)
    R = np.diag(var) + outer
    if np.linalg.eigvalsh(R).min() <= 0:
        raise input_error("gaussian_moments", "sigma2", "> 0 where S has zeros (R must be positive definite)",
                          sigma2)
    return Moments(np.diag(cov) + outer, R, mu, classes)


def monte_carlo_moments(view_pairs) -> Moments:
    """``Q_plus`` and ``R`` estimated from view pairs (any data: no Gaussian assumption).

    ``Q_plus`` is the symmetrised mean of ``z(v1) z(v2)^T``; ``R`` the mean of ``z z^T`` over both views.

    Args:
        view_pairs: ``[n, 2, N, N]`` real array, ``n >= 2`` pairs of views of the same images.
    """
    x = _images("monte_carlo_moments", "view_pairs", view_pairs)
    if x.ndim != 4 or x.shape[1] != 2 or x.shape[0] < 2:
        raise input_error("monte_carlo_moments", "view_pairs", "an array [n, 2, N, N] with n >= 2",
                          describe(view_pairs))
    classes = frequency_classes(x.shape[-1])
    z = class_powers(x, classes)
    z1, z2 = z[:, 0], z[:, 1]
    q = (z1.T @ z2) / len(z)
    Q = 0.5 * (q + q.T)
    both = z.reshape(-1, classes.size)
    R = both.T @ both / len(both)
    return Moments(Q, R, both.mean(0), classes, pairs=len(z))


# ----------------------------------------------------------------------------------------------
# the optimum
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WaterfillSolution:
    """The optimum of the spectral contrastive loss over PSD ``M`` of rank <= d.

    Attributes:
        eigenvalues: ``[C]`` every generalized eigenvalue of ``(Q_plus, R)``, largest first.
        modes: ``[C, C]`` the eigenvectors as columns, same order, ``u^T R u = 1``.
        weights: ``[d]`` the eigen-weights used: ``lambda_i`` (top-d) or ``(lambda_i - level)_+``.
        M: ``[C, C]`` ``sum_i weights_i u_i u_i^T``.
        loss: ``L(M)``; with top-d, ``L* = -sum_{i <= d} lambda_i^2``.
        d: the rank cap.
        level: the water level (``lambda_d`` for top-d).
    """

    eigenvalues: np.ndarray
    modes: np.ndarray
    weights: np.ndarray
    M: np.ndarray
    loss: float
    d: int
    level: float
    classes: FrequencyClasses | None = field(default=None, repr=False)


def _pair(function: str, Q_plus, R) -> tuple[np.ndarray, np.ndarray]:
    Q = np.asarray(Q_plus, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[0] != Q.shape[1] or Q.shape[0] < 1 or not np.isfinite(Q).all():
        raise input_error(function, "Q_plus", "a finite square matrix", describe(Q_plus))
    if R.shape != Q.shape or not np.isfinite(R).all():
        raise input_error(function, "R", f"a finite matrix of shape {Q.shape} (as Q_plus)", describe(R))
    return 0.5 * (Q + Q.T), 0.5 * (R + R.T)


def waterfill(Q_plus, R, d: int, level: float | None = None, *, classes: FrequencyClasses | None = None
              ) -> WaterfillSolution:
    """The closed-form optimum: the top-d generalized eigenpairs of ``Q_plus u = lambda R u``.

    Solved with ``scipy.linalg.eigh(Q_plus, R)`` (``R`` must be positive definite).

    Args:
        Q_plus: ``[C, C]`` positive-pair second moments (:func:`gaussian_moments` or :func:`monte_carlo_moments`).
        R: ``[C, C]`` second moments of one view.
        d: the embedding dimension (rank cap), ``1 <= d <= C``.
        level: ``None`` (top-d, weights ``lambda_i``) or a water level ``gamma >= 0`` (weights
            ``(lambda_i - gamma)_+`` on the top d).
        classes: the frequency classes, kept on the solution for :func:`shell_weights`.
    """
    from scipy.linalg import eigh

    Q, R = _pair("waterfill", Q_plus, R)
    d = check_int("waterfill", "d", d, low=1, high=Q.shape[0])
    if level is not None:
        level = check_finite("waterfill", "level", level, non_negative=True)
    try:
        lam, vec = eigh(Q, R)
    except np.linalg.LinAlgError:
        raise input_error("waterfill", "R", "a positive definite matrix", "a matrix that is not") from None
    lam, vec = lam[::-1], vec[:, ::-1]
    top = lam[:d]
    weights = top.copy() if level is None else np.maximum(top - level, 0.0)
    V = vec[:, :d]
    M = (V * weights) @ V.T
    loss = population_loss(M, Q, R)
    return WaterfillSolution(lam, vec, weights, M, loss, d, float(lam[d - 1] if level is None else level), classes)


def population_loss(M, Q_plus, R) -> float:
    """``L(M) = -2 tr(M Q_plus) + tr(M R M R)``: the spectral contrastive loss of a net whose ``(AU)^T (AU)`` is M.

    Args:
        M: ``[C, C]`` the representation matrix.
        Q_plus: ``[C, C]`` positive-pair second moments.
        R: ``[C, C]`` second moments of one view.
    """
    Q, R = _pair("population_loss", Q_plus, R)
    M = np.asarray(M, dtype=np.float64)
    if M.shape != Q.shape or not np.isfinite(M).all():
        raise input_error("population_loss", "M", f"a finite matrix of shape {Q.shape}", describe(M))
    MR = M @ R
    return float(-2.0 * np.sum(M * Q) + np.sum(MR * MR.T))


@dataclass(frozen=True)
class BestHead:
    """The optimal linear head for fixed filters: ``loss``, the head Gram ``B = A^T A`` ``[K, K]`` and ``M``."""

    loss: float
    B: np.ndarray
    M: np.ndarray


def best_head(U, Q_plus, R, d: int) -> BestHead:
    """The best head ``A`` (``d x K``) for fixed filter powers ``U`` (``K x C``), in closed form.

    With ``M = U^T B U``, ``B = A^T A`` PSD of rank <= d, the loss is the same problem on
    ``(U Q_plus U^T, U R U^T)``; a singular ``U R U^T`` (collinear filters) is handled by restricting to its range.

    Args:
        U: ``[K, C]`` non-negative filter powers per class.
        Q_plus: ``[C, C]`` positive-pair second moments.
        R: ``[C, C]`` second moments of one view.
        d: the embedding dimension.
    """
    from scipy.linalg import eigh

    Q, R = _pair("best_head", Q_plus, R)
    U = np.asarray(U, dtype=np.float64)
    if U.ndim != 2 or U.shape[1] != Q.shape[0] or not np.isfinite(U).all() or (U < 0).any():
        raise input_error("best_head", "U", f"finite non-negative filter powers of shape [K, {Q.shape[0]}]",
                          describe(U))
    d = check_int("best_head", "d", d, low=1)
    Qk, Rk = U @ Q @ U.T, U @ R @ U.T
    w, P = np.linalg.eigh(Rk)
    keep = w > w.max() * 1e-12
    P = P[:, keep] / np.sqrt(w[keep])          # whitening of the range of R_k
    lam, vec = eigh(P.T @ Qk @ P)
    lam, vec = lam[::-1][:d], vec[:, ::-1][:, :d]
    lam = np.maximum(lam, 0.0)
    W = P @ vec
    B = (W * lam) @ W.T
    M = U.T @ B @ U
    return BestHead(population_loss(M, Q, R), B, M)


def best_head_loss(U, Q_plus, R, d: int) -> float:
    """The loss of :func:`best_head`: the best any head can do on filters ``U``."""
    return best_head(U, Q_plus, R, d).loss


def class_weights(M, R) -> np.ndarray:
    """``diag(M) diag(R)``, normalised to sum 1: the share of the representation's energy in each class.

    Args:
        M: ``[C, C]`` the representation matrix.
        R: ``[C, C]`` second moments of one view.
    """
    M = np.asarray(M, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    if M.ndim != 2 or M.shape != R.shape:
        raise input_error("class_weights", "M", f"a matrix of shape {R.shape} (as R)", describe(M))
    w = np.clip(np.diag(M), 0, None) * np.diag(R)
    total = w.sum()
    if not total > 0:
        raise input_error("class_weights", "M", "a matrix with a positive diagonal somewhere", "a zero diagonal")
    return w / total


def shell_weights(M, R, classes: FrequencyClasses) -> dict[int, float]:
    """:func:`class_weights` summed over each shell: ``{|k|^2: weight}``.

    Args:
        M: ``[C, C]`` the representation matrix.
        R: ``[C, C]`` second moments of one view.
        classes: the frequency classes that index ``M``.
    """
    w = class_weights(M, R)
    if len(w) != classes.size:
        raise input_error("shell_weights", "classes", f"{len(w)} classes (as M)", classes.size)
    return {r: float(w[idx].sum()) for r, idx in classes.shells().items()}
