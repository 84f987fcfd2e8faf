"""Multi-objective diffusion with scarce pairs (arXiv 2605.25210): the public face of
``icml26.training.mol_diffusion``. Names load on first use (they import diffusers and transformers)."""

from __future__ import annotations

from icml26.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("SCALARIZATIONS", "noise_scheduler", "scalarize", "dsm_loss", "DSMFit", "fit_dsm", "DSMConfig",
                     "DSMTrainer", "collate_dsm"), "dsm"),
    **dict.fromkeys(("VARIANTS", "ddim_sampler", "ddim_sample", "TwoStageMOL", "fit_labeled_only"), "two_stage"),
    **dict.fromkeys(("STATE_SOURCES", "DiffusionPolicy", "fit_two_stage_policy"), "policy"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
