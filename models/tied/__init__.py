"""TIED: training-free inversion of data transformations by diffusion sampling on matrix Lie groups
(arXiv 2602.08267; ``icml26.models.tied``).

Modules: ``groups`` (batched matrix Lie groups, the image action), ``energies`` (PPCA, classifier free energy,
boundary penalty), ``sampler`` (:class:`TIEDSampler`, :class:`TIEDConfig`, :func:`trivialized_score`),
``baselines`` (random best-of-N, LieLAC, kinetic Langevin, FoCal), ``canonicalizer``
(:class:`TIEDCanonicalizer`) and ``classifier`` (:class:`DigitsCNN`, the classifier energy's network). The names below load on first use, so importing the package costs nothing.
"""

from __future__ import annotations

import importlib

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


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
