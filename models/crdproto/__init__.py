"""CRDProto (rank anomalies and rank-guided feature diffusion for noisy few-shot support sets; reconstructed): the
public face of ``icml26.models.crdproto``. Names load on first use (the prototypes import diffusers and
transformers)."""

from __future__ import annotations

from icml26.lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("SCORES", "svt", "row_shrink", "outlier_pursuit", "effective_rank", "soft_rank", "ClassBases",
                     "class_bases", "anomaly_scores", "flag_rows"), "lowrank"),
    **dict.fromkeys(("FeatureDiffusionConfig", "FeatureDiffusionModel", "class_summary", "MeanPrototypes",
                     "MedianPrototypes", "OraclePrototypes", "RepairResult", "RankGuidedPrototypes"), "prototypes"),
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
