"""TIED: training-free inversion of data transformations by diffusion sampling on matrix Lie groups
(arXiv 2602.08267; ``icml26.models.tied``).

Modules: ``groups`` (batched matrix Lie groups, the image action), ``energies`` (PPCA, classifier free energy,
boundary penalty), ``sampler`` (:class:`TIEDSampler`, :class:`TIEDConfig`, :func:`trivialized_score`),
``baselines`` (random best-of-N, LieLAC, kinetic Langevin, FoCal), ``canonicalizer``
(:class:`TIEDCanonicalizer`) and ``classifier`` (:class:`DigitsCNN`, the classifier energy's network). The names below load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

from icml26.lazy import lazy_exports

_EXPORTS = {
    "MatrixLieGroup": "groups", "SO": "groups", "SE2": "groups", "ImageAffine": "groups",
    "ImageHomography": "groups", "Heat1D": "groups", "Burgers1D": "groups", "act": "groups",
    "Energy": "energies", "PPCAEnergy": "energies", "ClassifierFreeEnergy": "energies",
    "BoundaryPenalty": "energies", "SumEnergy": "energies",
    "TIEDConfig": "sampler", "TIEDSampler": "sampler", "TIEDResult": "sampler", "trivialized_score": "sampler",
    "RandomBestOfN": "baselines", "LieLAC": "baselines", "KineticLangevin": "baselines", "FoCal": "baselines",
    "TIEDCanonicalizer": "canonicalizer", "DigitsCNN": "classifier",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
