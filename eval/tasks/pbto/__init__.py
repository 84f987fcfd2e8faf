"""The PBTO backdoor-persistence audit ("Persistent Backdoor Attacks in Class-Incremental Learning via Structural
Invariant Anchoring", ICML 2026; after the public, self-declared reproduction hjhkkkc/PBTO): digit streams and
replacement poisoning (:mod:`.data`), structural diagnostics (:mod:`.diagnostics`), triggers (:mod:`.triggers`),
memory defences (:mod:`.defences`) and the audit (:mod:`.audit`).

Scope: an audit for class-incremental users (does replay wash out an injected behaviour; does a memory defence
help?). Trigger fitting runs inside this harness on bundled or local data; there is no hub, export or deployment
path.
"""

from .audit import AuditReport, PersistenceAudit, accuracy_curve, asr_curve, cka_profile, half_life, train_stream
from .data import CILStream, CILTask, digits_streams, poison, poison_indices
from .defences import ActivationClusteringFilter, SpectralSignatureFilter
from .diagnostics import (
    fisher_drift_overlap,
    gram_anchor_loss,
    gram_matrix,
    grassmann_distance,
    linear_cka,
    pca_basis,
)
from .triggers import PRESETS, AnchoredTrigger, PatchTrigger, attack_success_rate

__all__ = ["AnchoredTrigger", "ActivationClusteringFilter", "AuditReport", "CILStream", "CILTask", "PRESETS",
           "PatchTrigger", "PersistenceAudit", "SpectralSignatureFilter", "accuracy_curve", "asr_curve",
           "attack_success_rate", "cka_profile", "digits_streams", "fisher_drift_overlap", "grassmann_distance",
           "gram_anchor_loss", "gram_matrix", "half_life", "linear_cka", "pca_basis", "poison", "poison_indices",
           "train_stream"]
