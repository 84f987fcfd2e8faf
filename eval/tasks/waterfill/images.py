"""Images for contrastive waterfilling: Gaussian stationary images of any spectrum, view pairs of natural patches
(shifted crops plus noise), the offline image sets of scikit-learn and scikit-image, and texture patches for a
linear probe.

- :func:`stationary_images` / :class:`StationaryStream`: ``x = Re(ifft2(N sqrt(S) Z))``, the synthetic setting.
- :func:`natural_view_pairs` / :class:`NaturalPairStream`: two crops of one photo offset by up to ``max_shift``
  pixels, each with white noise (random crops are translation plus a change of content at the border).
- :func:`image_sets`: grey versions of the photos that ship inside the scikit-learn and scikit-image wheels (no
  download): scikit-learn's two sample photos, seven scikit-image photos, its three textures (brick, grass,
  gravel) and ``lfw_subset`` (200 faces, 25 x 25). scikit-image is the optional extra ``icml26[waterfill]``.
- :func:`texture_patches`: labelled patches of the three textures, from disjoint halves of each texture image, for
  the probe of how useful a contrastive representation is downstream.
"""

from __future__ import annotations

import math

import numpy as np

from icml26.errors import describe, input_error
from icml26.eval.tasks.waterfill.spectra import _spectrum
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["IMAGE_SETS", "NaturalPairStream", "StationaryStream", "image_sets", "natural_view_pairs", "sample_photos",
           "stationary_images", "texture_patches"]

def stationary_images(n: int, S, count: int, seed) -> np.ndarray:
    """``count`` Gaussian stationary ``n x n`` images with spectrum ``S`` (``E|fft2(x)|^2 / n^2 = S``).

    ``x = Re(ifft2(N sqrt(S) Z))`` with ``Z`` complex white noise (unit variance in each part): a Gaussian
    stationary field with ``E|x_hat|^2 = N^2 S``, because ``S`` is conjugate-symmetric.

    Args:
        n: the image size.
        S: ``[n, n]`` power spectrum.
        count: the number of images.
        seed: anything ``numpy.random.default_rng`` takes.
    """
    n = check_int("stationary_images", "n", n, low=2)
    S = _spectrum("stationary_images", S)
    if S.shape != (n, n):
        raise input_error("stationary_images", "S", f"a spectrum of shape ({n}, {n})", describe(S))
    count = check_int("stationary_images", "count", count, low=1)
    return _stationary(np.sqrt(S), count, np.random.default_rng(seed))


def _stationary(root_S: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    # Re(ifft2(N sqrt(S) Z)) with Z complex white of unit variance per part: one transform instead of two, and the
    # real part of a field whose spectrum is symmetric has the spectrum (|c(w)|^2 + |c(-w)|^2) / 2 = S N^2.
    n = root_S.shape[0]
    z = rng.standard_normal((count, n, n, 2)).view(np.complex128)[..., 0]
    return np.fft.ifft2(z * (n * root_S)).real


class StationaryStream:
    """:func:`stationary_images` for a training loop: the spectrum is checked once, and images are drawn
    ``chunk`` batches at a time (one vectorised transform) and handed out batch by batch.

    Args:
        S: ``[N, N]`` power spectrum.
        chunk: batches drawn at once.
    """

    def __init__(self, S, chunk: int = 64) -> None:
        self.root = np.sqrt(_spectrum("StationaryStream", S))
        self.chunk = check_int("StationaryStream", "chunk", chunk, low=1)
        self._left = np.empty((0, *self.root.shape))

    def __call__(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``count`` images from ``rng`` (a ``numpy.random.Generator``)."""
        if len(self._left) < count:
            self._left = np.concatenate([self._left, _stationary(self.root, count * self.chunk, rng)])
        out, self._left = self._left[:count], self._left[count:]
        return out


def sample_photos() -> list[np.ndarray]:
    """scikit-learn's two offline sample photos (china, flower) in grey (luma), float64 in [0, 1]."""
    from sklearn.datasets import load_sample_images

    return [_grey(img) for img in load_sample_images().images]


def natural_view_pairs(n: int, count: int, sigma2: float, seed, *, max_shift: int = 2, power: float | None = None,
                       photos: list[np.ndarray] | None = None) -> np.ndarray:
    """View pairs of natural ``n x n`` patches: two crops of one photo, offset by up to ``max_shift`` pixels in
    each direction, each with white noise of variance ``sigma2``.

    Each photo has its mean removed; ``power`` (if given) rescales the photos so that a crop's expected mean
    squared pixel is ``power`` (so noise levels compare with a synthetic setting of that power).

    Args:
        n: the patch size.
        count: the number of pairs.
        sigma2: the noise variance of each view.
        seed: anything ``numpy.random.default_rng`` takes.
        max_shift: the largest offset between the two crops, in pixels (>= 0).
        power: the target mean squared pixel (``None``: keep the photos' scale).
        photos: grey images (2-D arrays of at least ``n + 2 max_shift`` pixels a side); default
            :func:`sample_photos`.

    Returns:
        ``[count, 2, n, n]`` float64 array.
    """
    count = check_int("natural_view_pairs", "count", count, low=1)
    stream = NaturalPairStream(n, sigma2, max_shift=max_shift, power=power, photos=photos, _function="natural_view_pairs")
    return stream(count, np.random.default_rng(seed))


class NaturalPairStream:
    """:func:`natural_view_pairs` for a training loop: the photos are loaded, checked, centred and scaled once.

    Args:
        n: the patch size.
        sigma2: the noise variance of each view.
        max_shift: the largest offset between the two crops, in pixels (>= 0).
        power: the target mean squared pixel (``None``: keep the photos' scale).
        photos: grey images (default :func:`sample_photos`).
    """

    def __init__(self, n: int, sigma2: float, *, max_shift: int = 2, power: float | None = None,
                 photos: list[np.ndarray] | None = None, _function: str = "NaturalPairStream") -> None:
        fn = _function
        self.n = check_int(fn, "n", n, low=2)
        self.sigma2 = check_finite(fn, "sigma2", sigma2, non_negative=True)
        self.max_shift = check_int(fn, "max_shift", max_shift, low=0)
        if power is not None:
            power = check_finite(fn, "power", power, positive=True)
        photos = sample_photos() if photos is None else photos
        grey = []
        for i, p in enumerate(photos):
            p = np.asarray(p, dtype=np.float64)
            if p.ndim != 2 or min(p.shape) < n + 2 * max_shift or not np.isfinite(p).all():
                raise input_error(fn, "photos", f"finite 2-D images of at least n + 2 max_shift = "
                                  f"{n + 2 * max_shift} pixels a side", f"item {i}: {describe(p)}")
            grey.append(p - p.mean())
        if not grey:
            raise input_error(fn, "photos", "at least one image", "an empty list")
        if power is not None:
            scale = math.sqrt(power / np.mean([np.mean(p ** 2) for p in grey]))
            grey = [p * scale for p in grey]
        self.photos = grey

    def __call__(self, count: int, rng: np.random.Generator) -> np.ndarray:
        """``[count, 2, n, n]`` view pairs drawn from ``rng`` (a ``numpy.random.Generator``)."""
        n, max_shift = self.n, self.max_shift
        out = np.empty((count, 2, n, n))
        which = rng.integers(len(self.photos), size=count)
        span = np.arange(n)
        for k, p in enumerate(self.photos):
            rows = np.flatnonzero(which == k)
            if not len(rows):
                continue
            h, w = p.shape
            a = rng.integers(max_shift, h - n - max_shift + 1, size=len(rows))
            b = rng.integers(max_shift, w - n - max_shift + 1, size=len(rows))
            da, db = rng.integers(-max_shift, max_shift + 1, size=(2, len(rows)))
            for view, (ra, rb) in enumerate(((a, b), (a + da, b + db))):
                out[rows, view] = p[(ra[:, None] + span)[:, :, None], (rb[:, None] + span)[:, None, :]]
        if self.sigma2 > 0:
            out += rng.standard_normal(out.shape) * math.sqrt(self.sigma2)
        return out


#: The offline image sets of :func:`image_sets`: name -> (library, images).
IMAGE_SETS = {
    "sklearn photos": ("scikit-learn", ("china", "flower")),
    "skimage photos": ("scikit-image", ("camera", "astronaut", "coffee", "chelsea", "rocket", "coins", "moon")),
    "textures": ("scikit-image", ("brick", "grass", "gravel")),
    "lfw_subset": ("scikit-image", ("lfw_subset",)),
}


def _grey(image) -> np.ndarray:
    image = np.asarray(image, dtype=np.float64)
    if image.ndim == 3:
        image = image[..., :3] @ np.array([0.299, 0.587, 0.114])
    return image / 255.0 if image.max() > 1.0 else image


def image_sets(names=None) -> dict[str, list[np.ndarray]]:
    """Grey images in [0, 1] of the offline image sets (see :data:`IMAGE_SETS`); the scikit-image sets need the
    extra ``pip install "icml26[waterfill]"``.

    Args:
        names: the sets to load (default all).
    """
    names = list(IMAGE_SETS) if names is None else list(names)
    out = {}
    for name in names:
        check_choice("image_sets", "names", name, list(IMAGE_SETS))
        library, items = IMAGE_SETS[name]
        if library == "scikit-learn":
            out[name] = sample_photos()
            continue
        try:
            import skimage.data
        except ImportError:
            raise input_error("image_sets", "names", f"sets that need no extra, or scikit-image installed (pip install "
                              f"\"icml26[waterfill]\") for {name!r}", name) from None
        if items == ("lfw_subset",):
            out[name] = list(skimage.data.lfw_subset())
        else:
            out[name] = [_grey(getattr(skimage.data, item)()) for item in items]
    return out


def texture_patches(n: int, per_class: int, seed, *, half: str = "top") -> tuple[np.ndarray, np.ndarray]:
    """``per_class`` random ``n x n`` patches of each of scikit-image's brick, grass and gravel textures, centred
    and scaled to unit mean square, from the top or bottom half of each image (disjoint train and test patches).

    Args:
        n: patch size.
        per_class: patches per texture.
        seed: anything ``numpy.random.default_rng`` takes.
        half: ``"top"`` or ``"bottom"``.

    Returns:
        ``(patches [3 per_class, n, n], labels [3 per_class])``, labels 0 brick, 1 grass, 2 gravel.
    """
    n = check_int("texture_patches", "n", n, low=2)
    per_class = check_int("texture_patches", "per_class", per_class, low=1)
    half = check_choice("texture_patches", "half", half, ("top", "bottom"))
    rng = np.random.default_rng(seed)
    patches, labels = [], []
    for label, image in enumerate(image_sets(["textures"])["textures"]):
        h = image.shape[0] // 2
        part = image[:h] if half == "top" else image[h:]
        if min(part.shape) < n:
            raise input_error("texture_patches", "n", f"at most {min(part.shape)} (half a texture image)", n)
        a = rng.integers(0, part.shape[0] - n + 1, size=per_class)
        b = rng.integers(0, part.shape[1] - n + 1, size=per_class)
        span = np.arange(n)
        crops = part[(a[:, None] + span)[:, :, None], (b[:, None] + span)[:, None, :]]
        crops = crops - crops.mean((1, 2), keepdims=True)
        crops = crops / np.sqrt(np.maximum((crops ** 2).mean((1, 2), keepdims=True), 1e-12))
        patches.append(crops)
        labels.append(np.full(per_class, label))
    return np.concatenate(patches), np.concatenate(labels)
