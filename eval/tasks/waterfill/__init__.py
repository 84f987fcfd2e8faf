"""Contrastive waterfilling (ICML 2026, "A Theory of Contrastive Learning with Natural Images"): the closed-form
optimum from the power spectrum (:mod:`~icml26.eval.tasks.waterfill.spectra`) and the images it is measured on
(:mod:`~icml26.eval.tasks.waterfill.images`)."""

from icml26.eval.tasks.waterfill.images import (
    IMAGE_SETS,
    NaturalPairStream,
    StationaryStream,
    image_sets,
    natural_view_pairs,
    sample_photos,
    stationary_images,
    texture_patches,
)
from icml26.eval.tasks.waterfill.spectra import (
    BestHead,
    FrequencyClasses,
    Moments,
    WaterfillSolution,
    best_head,
    best_head_loss,
    class_powers,
    class_weights,
    frequency_classes,
    gaussian_moments,
    inverse_power_spectrum,
    monte_carlo_moments,
    population_loss,
    shell_weights,
    waterfill,
)

__all__ = ["IMAGE_SETS", "BestHead", "FrequencyClasses", "Moments", "NaturalPairStream", "StationaryStream",
           "WaterfillSolution", "best_head", "best_head_loss", "class_powers", "class_weights", "frequency_classes",
           "gaussian_moments", "image_sets", "inverse_power_spectrum", "monte_carlo_moments", "natural_view_pairs",
           "population_loss", "sample_photos", "shell_weights", "stationary_images", "texture_patches", "waterfill"]
