"""Batched connected matrix Lie groups with scaled Lie-algebra bases, and the image action.

TIED (Kim, Kaba, Park, Hong, Ravanbakhsh, "Inverting Data Transformations via Diffusion Sampling",
arXiv 2602.08267) keeps its sampler state in a matrix group ``G`` and takes every step in the
coefficient space of a basis ``X_1..X_m`` of its Lie algebra; each generator is pre-scaled by ``s_i``
so that one unit of coefficient moves the data by a comparable amount (official code ``jw9730/tied``,
``src/groups.py``, ``ConnectedMatrixLieGroup``)::

    exp(c) = matrix_exp(sum_i c_i s_i X_i),  g <- g . exp(step)   (right multiplication)

Groups: :class:`SO` (``SO(n)``), :class:`SE2` (rotation and translation of the image plane),
:class:`ImageAffine` (the six ``E_ij`` of the top two rows of a 3x3 matrix), :class:`ImageHomography`
(the repository's scaled ``sl(3)``), :class:`Burgers1D` (``SL(2,R) x| R^2``) and :class:`Heat1D`
(``SL(2,R) x| H(1,R)``, the Jacobi group). :func:`act` samples an image at the points ``g p`` of a
``[-1, 1]^2`` grid, so ``act(g, act(h, x)) = act(h g, x)`` and ``act(g^-1, act(g, x))`` restores ``x``
up to interpolation and the zero padding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from icml26.errors import describe, described, input_error
from icml26.validation import check_finite, check_int

__all__ = ["MatrixLieGroup", "SO", "SE2", "ImageAffine", "ImageHomography", "Burgers1D", "Heat1D", "act",
           "image_grid", "rotation_translation", "structure_constants"]

#: ImageHomography's generator scales in the order (11, 12, 13, 21, 22, 23, 31, 32) (official configs).
HOMOGRAPHY_SCALES = (0.15, 0.35, 0.5, 0.35, 0.15, 0.5, 0.15, 0.15)
#: ImageAffine's generator scales in the order (11, 12, 13, 21, 22, 23) (official configs).
AFFINE_SCALES = (0.084, 0.084, 0.421, 0.084, 0.084, 0.421)


def _E(n: int, i: int, j: int) -> torch.Tensor:
    m = torch.zeros(n, n, dtype=torch.float64)
    m[i, j] = 1.0
    return m


def structure_constants(basis: torch.Tensor) -> tuple[torch.Tensor, float]:
    """``C[i, j, k]`` with ``[X_i, X_j] = sum_k C[i, j, k] X_k`` (least squares) and the largest residual.

    A residual above round-off means the span of ``basis`` is not closed under the bracket: it is not a
    Lie algebra.
    """
    m = basis.shape[0]
    A = basis.reshape(m, -1).T  # (n*n, m)
    brackets = torch.einsum("iab,jbc->ijac", basis, basis) - torch.einsum("jab,ibc->ijac", basis, basis)
    rhs = brackets.reshape(m * m, -1).T  # (n*n, m*m)
    coef = torch.linalg.lstsq(A, rhs).solution  # (m, m*m)
    residual = (A @ coef - rhs).abs().max().item() if rhs.numel() else 0.0
    return coef.T.reshape(m, m, m), residual


class MatrixLieGroup:
    """A connected matrix Lie group ``G < GL(n)`` given by a basis of its Lie algebra and generator scales.

    Parameters
    ----------
    basis:
        ``(m, n, n)`` generators ``X_i`` (linearly independent, their span closed under the commutator).
    scales:
        ``(m,)`` positive pre-scales ``s_i`` (default ones); coefficients ``c`` stand for ``sum c_i s_i X_i``.
    in_algebra:
        optional test a generator must pass (skew-symmetry for ``so(n)``, zero trace for ``sl(n)``, ...),
        so a basis outside the intended algebra is refused.
    name:
        shown in ``repr`` and error messages.

    Elements are ``(..., n, n)`` tensors; every method is batched over the leading dimensions.
    """

    algebra_description = "a basis of a Lie algebra"

    def __init__(self, basis, scales: Sequence[float] | torch.Tensor | None = None, *,
                 in_algebra: Callable[[torch.Tensor], bool] | None = None, name: str | None = None) -> None:
        fn = f"{type(self).__name__}"
        basis = torch.as_tensor(basis, dtype=torch.float64)
        if basis.ndim != 3 or basis.shape[1] != basis.shape[2] or basis.shape[0] < 1:
            raise input_error(fn, "basis", "generators of shape (m, n, n) with m >= 1", describe(basis))
        m, n, _ = basis.shape
        if not torch.isfinite(basis).all():
            raise input_error(fn, "basis", "finite generators", described("non-finite entries"))
        if torch.linalg.matrix_rank(basis.reshape(m, -1)).item() < m:
            raise input_error(fn, "basis", "linearly independent generators", described(f"{m} generators of rank "
                              f"{torch.linalg.matrix_rank(basis.reshape(m, -1)).item()}"))
        if in_algebra is not None:
            for i in range(m):
                if not in_algebra(basis[i]):
                    raise input_error(fn, "basis", self.algebra_description, described(f"generator {i} outside it"))
        C, residual = structure_constants(basis)
        if residual > 1e-8 * max(1.0, basis.abs().max().item() ** 2):
            raise input_error(fn, "basis", "generators whose span is closed under the commutator (a Lie algebra)",
                              described(f"brackets off the span by {residual:.3g}"))
        if scales is None:
            scales = torch.ones(m, dtype=torch.float64)
        scales = torch.as_tensor(scales, dtype=torch.float64).reshape(-1)
        if scales.shape != (m,) or not bool((scales > 0).all()) or not torch.isfinite(scales).all():
            raise input_error(fn, "scales", f"{m} positive finite scales", describe(scales))
        self.basis, self.scales, self.name = basis, scales, name or fn
        self.structure = C
        self._cache: dict = {}

    # -- sizes ----------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """``m``, the number of coefficients."""
        return self.basis.shape[0]

    @property
    def n(self) -> int:
        """The matrix size."""
        return self.basis.shape[1]

    def __repr__(self) -> str:
        return f"{self.name}(dim={self.dim}, n={self.n})"

    def scaled_basis(self, dtype=torch.float32, device=None) -> torch.Tensor:
        """``(m, n, n)``: ``s_i X_i`` in ``dtype`` on ``device`` (cached)."""
        key = (dtype, str(device))
        if key not in self._cache:
            self._cache[key] = (self.basis * self.scales[:, None, None]).to(dtype=dtype, device=device)
        return self._cache[key]

    # -- maps ------------------------------------------------------------------------------------
    def _check_coeff(self, c, fn: str) -> torch.Tensor:
        if not isinstance(c, torch.Tensor):
            raise TypeError(f"{self.name}.{fn}: c: expected a tensor, got {type(c).__name__}")
        if c.ndim < 1 or c.shape[-1] != self.dim:
            raise input_error(f"{self.name}.{fn}", "c", f"coefficients of shape (..., {self.dim})", describe(c))
        return c

    def hat(self, c: torch.Tensor) -> torch.Tensor:
        """``(..., m) -> (..., n, n)``: ``sum_i c_i s_i X_i``."""
        c = self._check_coeff(c, "hat")
        return torch.einsum("...i,ijk->...jk", c, self.scaled_basis(c.dtype, c.device))

    def exp(self, c: torch.Tensor) -> torch.Tensor:
        """``matrix_exp(sum_i c_i s_i X_i)``."""
        return torch.linalg.matrix_exp(self.hat(c))

    def linearized_exp(self, c: torch.Tensor) -> torch.Tensor:
        """``I + sum_i c_i s_i X_i``: the exponential to first order (its derivative at ``c = 0`` is exact)."""
        return self.identity(c.shape[:-1], dtype=c.dtype, device=c.device) + self.hat(c)

    def compose(self, g: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """``g h`` (broadcast over leading dimensions)."""
        return g @ h

    def inverse(self, g: torch.Tensor) -> torch.Tensor:
        """``g^-1``."""
        return torch.linalg.inv(g)

    def identity(self, shape: Sequence[int] | int = (), dtype=torch.float32, device=None) -> torch.Tensor:
        """``(*shape, n, n)`` identities."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return torch.eye(self.n, dtype=dtype, device=device).expand(*shape, self.n, self.n).clone()

    def random_coeff(self, shape: Sequence[int] | int, std: float = 1.0, *, generator: torch.Generator | None = None,
                     dtype=torch.float32, device=None) -> torch.Tensor:
        """``(*shape, m)`` Gaussian coefficients with standard deviation ``std`` (``>= 0``)."""
        std = check_finite(f"{self.name}.random_coeff", "std", std, non_negative=True)
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        return std * torch.randn(*shape, self.dim, generator=generator, dtype=dtype).to(device)

    def adjoint_trace(self) -> torch.Tensor:
        """``(m,)``: ``tr(ad_{s_i X_i})`` under the scaled basis, ``s_i sum_j C_ij^j``.

        Zero for a unimodular group (``SO(n)``, ``SE(2)``, ``SL(n)``); the modular correction of TIED's
        forward noising uses it (official ``adjoint_trace``).
        """
        return self.scales * torch.einsum("ijj->i", self.structure)

    def check_element(self, g, fn: str, argument: str = "g") -> torch.Tensor:
        if not isinstance(g, torch.Tensor):
            raise TypeError(f"{fn}: {argument}: expected a tensor, got {type(g).__name__}")
        if g.ndim < 2 or g.shape[-2:] != (self.n, self.n):
            raise input_error(fn, argument, f"group elements of shape (..., {self.n}, {self.n})", describe(g))
        return g


def _skew(x: torch.Tensor) -> bool:
    return bool(torch.allclose(x, -x.T))


class SO(MatrixLieGroup):
    """``SO(n)``: basis ``E_ij - E_ji`` (``i < j``), unit scales unless given."""

    algebra_description = "skew-symmetric generators (so(n))"

    def __init__(self, n: int, scales=None, basis=None) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise input_error("SO", "n", "an int >= 2", n)
        if basis is None:
            basis = torch.stack([_E(n, i, j) - _E(n, j, i) for i in range(n) for j in range(i + 1, n)])
        super().__init__(basis, scales, in_algebra=_skew, name=f"SO({n})")

    def inverse(self, g: torch.Tensor) -> torch.Tensor:
        return g.transpose(-1, -2)


def _last_row_zero(x: torch.Tensor) -> bool:
    return bool(x[-1].abs().max() == 0)


class SE2(MatrixLieGroup):
    """Rotations and translations of the image plane as 3x3 homogeneous matrices.

    Basis (rotation ``E21 - E12``, ``x``-shift ``E13``, ``y``-shift ``E23``) with scales
    ``(0.6, 0.15, 0.15)``: one coefficient unit is 0.6 rad or 0.15 of the half-width.
    Reconstruction: the official code has no SE(2) image group; these scales are the ones calibrated for the
    digits stand-in.
    """

    algebra_description = "generators of se(2) with a zero last row"

    def __init__(self, scales=(0.6, 0.15, 0.15), basis=None) -> None:
        if basis is None:
            basis = torch.stack([_E(3, 1, 0) - _E(3, 0, 1), _E(3, 0, 2), _E(3, 1, 2)])
        super().__init__(basis, scales, in_algebra=lambda x: _last_row_zero(x) and _skew(x[:2, :2]), name="SE2")

    def inverse(self, g: torch.Tensor) -> torch.Tensor:
        R, t = g[..., :2, :2], g[..., :2, 2:]
        Rt = R.transpose(-1, -2)
        top = torch.cat([Rt, -Rt @ t], -1)
        return torch.cat([top, g[..., 2:, :]], -2)


class ImageAffine(MatrixLieGroup):
    """The affine group of the plane, ``GL+(2) x| R^2``: the six ``E_ij`` of the top two rows (official
    ``ImageAffine``), scales :data:`AFFINE_SCALES`. Not unimodular: ``tr(ad_{E11}) = tr(ad_{E22}) = 1``."""

    algebra_description = "generators with a zero last row (aff(2))"

    def __init__(self, scales=AFFINE_SCALES, basis=None) -> None:
        if basis is None:
            basis = torch.stack([_E(3, i, j) for i in range(2) for j in range(3)])
        super().__init__(basis, scales, in_algebra=_last_row_zero, name="ImageAffine")


def _traceless(x: torch.Tensor) -> bool:
    return abs(float(torch.trace(x))) < 1e-12


class ImageHomography(MatrixLieGroup):
    """Projective maps of the plane, ``SL(3)`` (official ``ImageHomography``): ``E_ij`` for ``(i, j) != (3, 3)``
    with the diagonal ones made traceless (``E_ii - I/3``), scales :data:`HOMOGRAPHY_SCALES` in the order
    ``(11, 12, 13, 21, 22, 23, 31, 32)``. Unimodular."""

    algebra_description = "traceless generators (sl(3))"

    def __init__(self, scales=HOMOGRAPHY_SCALES, basis=None) -> None:
        if basis is None:
            eye = torch.eye(3, dtype=torch.float64) / 3
            basis = torch.stack([_E(3, i, j) - (eye if i == j else 0) for i in range(3) for j in range(3)
                                 if (i, j) != (2, 2)])
        super().__init__(basis, scales, in_algebra=_traceless, name="ImageHomography")

    def inverse(self, g: torch.Tensor) -> torch.Tensor:
        return torch.linalg.inv(g)


class Burgers1D(MatrixLieGroup):
    """``SL(2,R) x| R^2`` as 3x3 matrices ``[[A, b], [0, 1]]``, ``A`` in ``SL(2)``: the Lie point symmetries of
    viscous Burgers' equation used by TIED (official ``Burgers1D``: projective time map ``(alpha, beta, gamma,
    delta)``, space translation ``lambda_0``, Galilean boost ``lambda_1``).

    Basis ``(H, E, F, b_0, b_1)`` with ``sl(2)`` scales 0.1 (official). Reconstruction: the translation scales
    (default 1.0) and this matrix realisation; the action on ``(x, t, u)`` PDE data is not implemented here
    (no PDE data or DeepONets offline).
    """

    algebra_description = "generators [[a, b], [0, 0]] with a traceless a (sl(2) x| R^2)"

    def __init__(self, scales=(0.1, 0.1, 0.1, 1.0, 1.0), basis=None) -> None:
        if basis is None:
            basis = torch.stack([_E(3, 0, 0) - _E(3, 1, 1), _E(3, 0, 1), _E(3, 1, 0), _E(3, 0, 2), _E(3, 1, 2)])
        super().__init__(basis, scales, in_algebra=lambda x: _last_row_zero(x) and _traceless(x[:2, :2]),
                         name="Burgers1D")


class Heat1D(MatrixLieGroup):
    """``SL(2,R) x| H(1,R)`` (the Jacobi group) as 4x4 matrices: the Lie point symmetries of the heat equation used
    by TIED (official ``Heat1D``: ``SL(2)`` acting projectively on time, space translation, Galilean boost and the
    central log-scaling of ``u``).

    Realisation: the algebra elements ``[[0, r, z], [0, a, J r^T], [0, 0, 0]]`` with ``a`` in ``sl(2)``,
    ``r`` in ``R^2``, ``z`` in ``R`` and ``J = [[0, 1], [-1, 0]]`` (closed under the bracket because ``a J + J a^T
    = 0`` on ``sl(2) = sp(2)``; the bracket of two Heisenberg elements is central). Basis ``(H, E, F, P, Q, Z)``
    with ``sl(2)`` scales 0.02 (official). Reconstruction: the other scales (1.0) and the realisation; the PDE
    action is not implemented here.
    """

    algebra_description = "generators of the Jacobi algebra sl(2) x| h(1)"

    def __init__(self, scales=(0.02, 0.02, 0.02, 1.0, 1.0, 1.0), basis=None) -> None:
        if basis is None:
            def block(a=((0, 0), (0, 0)), r=(0, 0), z=0.0):
                x = torch.zeros(4, 4, dtype=torch.float64)
                a, r = torch.tensor(a, dtype=torch.float64), torch.tensor(r, dtype=torch.float64)
                x[1:3, 1:3] = a
                x[0, 1:3] = r
                x[1:3, 3] = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64) @ r
                x[0, 3] = z
                return x
            basis = torch.stack([block(a=((1, 0), (0, -1))), block(a=((0, 1), (0, 0))), block(a=((0, 0), (1, 0))),
                                 block(r=(1, 0)), block(r=(0, 1)), block(z=1.0)])

        def jacobi(x: torch.Tensor) -> bool:
            J = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=x.dtype)
            return (bool(x[3].abs().max() == 0) and bool(x[1:3, 0].abs().max() == 0) and bool(x[0, 0] == 0)
                    and _traceless(x[1:3, 1:3]) and bool(torch.allclose(x[1:3, 3], J @ x[0, 1:3])))

        super().__init__(basis, scales, in_algebra=jacobi, name="Heat1D")


# ----------------------------------------------------------------------------------------------
# the image action
# ----------------------------------------------------------------------------------------------
def image_grid(height: int, width: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """``(H, W, 3)`` homogeneous pixel coordinates ``(x, y, 1)`` on ``[-1, 1]^2`` (pixel centres at the ends,
    ``align_corners=True``), ``x`` along the width."""
    height, width = check_int("image_grid", "height", height, low=1), check_int("image_grid", "width", width, low=1)
    ys = torch.linspace(-1, 1, height, dtype=dtype, device=device)
    xs = torch.linspace(-1, 1, width, dtype=dtype, device=device)
    yy, xx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([xx, yy, torch.ones_like(xx)], -1)


def act(g: torch.Tensor, x: torch.Tensor, *, return_grid: bool = False):
    """The image action: pixel ``p`` of the result is ``x(pi(g p~))`` (official ``act``).

    ``g``: ``(B, 3, 3)`` or ``(3, 3)``; ``x``: ``(B, C, H, W)``. Homogeneous coordinates of a ``[-1, 1]^2`` grid
    are multiplied by ``g``, dehomogenised (the third coordinate kept at least ``1e-12`` in magnitude) and ``x``
    is bilinearly sampled there with zero padding. With ``return_grid`` also the ``(B, H, W, 2)`` sampling grid
    (the boundary penalty reads it). ``act(g, act(h, x)) = act(h g, x)`` up to interpolation.
    """
    import torch.nn.functional as F

    if not isinstance(x, torch.Tensor) or not isinstance(g, torch.Tensor):
        raise TypeError(f"act: expected tensors g and x, got {type(g).__name__} and {type(x).__name__}")
    if x.ndim != 4:
        raise input_error("act", "x", "images of shape (B, C, H, W)", describe(x))
    if g.shape == (3, 3):
        g = g.expand(x.shape[0], 3, 3)
    if g.ndim != 3 or g.shape[1:] != (3, 3) or g.shape[0] != x.shape[0]:
        raise input_error("act", "g", f"3x3 group elements of shape ({x.shape[0]}, 3, 3) or (3, 3)", describe(g))
    B, _, H, W = x.shape
    p = image_grid(H, W, dtype=g.dtype, device=g.device)
    q = torch.einsum("bij,hwj->bhwi", g, p)
    z = q[..., 2:]
    z = torch.where(z.abs() < 1e-12, torch.full_like(z, 1e-12) * torch.where(z < 0, -1.0, 1.0), z)
    grid = q[..., :2] / z
    out = F.grid_sample(x.to(grid.dtype), grid, mode="bilinear", padding_mode="zeros", align_corners=True)
    out = out.to(x.dtype) if not x.dtype.is_floating_point or x.dtype == out.dtype else out
    return (out, grid) if return_grid else out


def rotation_translation(angle: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """``(B, 3, 3)`` SE(2) elements with rotation ``angle`` (radians) and translation ``shift`` ``(B, 2)``."""
    c, s = torch.cos(angle), torch.sin(angle)
    g = torch.zeros(angle.shape[0], 3, 3, dtype=angle.dtype, device=angle.device)
    g[:, 0, 0], g[:, 0, 1], g[:, 1, 0], g[:, 1, 1] = c, -s, s, c
    g[:, :2, 2] = shift
    g[:, 2, 2] = 1
    return g

