"""The one moving average of a model's weights the toolkit's trainers keep (``ema_decay`` arguments).

:func:`weight_ema` builds ema-pytorch's ``EMA`` the same way for every trainer: updated after every
optimiser step (``update_every=1``), from the first step on (``update_after_step=0``: the first update
copies the weights), with ema-pytorch's warm-up of the decay, ``min(decay, 1 - k ** (-2/3))`` at the
k-th update, and without the online model in its state dict (checkpoints hold the average alone).
"""

from __future__ import annotations

__all__ = ["weight_ema"]


def weight_ema(model, decay: float):
    """An ema-pytorch ``EMA`` of ``model``'s weights with decay ``decay`` (call ``.update()`` after each
    optimiser step; the average is ``.ema_model``)."""
    from ema_pytorch import EMA

    return EMA(model, beta=decay, update_after_step=0, update_every=1, include_online_model=False)
