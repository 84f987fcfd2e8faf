"""Grokking tasks for R2G (:mod:`icml26.training.r2g`): modular arithmetic and Grokfast's anchor task.

- :func:`modular_dataset`: ``a op b mod p`` as a ``datasets.DatasetDict`` (seeded train/test split)
  whose rows feed a causal LM directly: ``input_ids = [a, b, =, c]``, ``labels`` only on ``c``,
  ``r2g_mask`` on the two operands;
- :func:`small_decoder`: a 1-layer GPT-2 built from a ``GPT2Config`` in the style of Nanda et al.
  (2023, arXiv 2301.05217): no LayerNorm, ReLU MLP, embeddings and positions
  ``N(0, d^-1/2)`` (the initialisation scale decides how fast the model memorises), the linear
  layers at PyTorch's default ``U(+-1/sqrt(fan_in))``;
- :func:`steps_to`: the first step a curve reaches a threshold; :func:`censored_median`: their median
  when runs stop at a cap;
- Grokfast's task (ironjr/grokfast ``main.py``): :func:`anchor_dataset` (``a op b mod 97``, its
  seeded split) and :func:`anchor_decoder` (its 2-layer decoder as a GPT-2 with its initial weights);
- the training loops and the geometry they measure are R2G's own: :mod:`icml26.training.r2g.loops`;
- the tense-inflection language task lives in :mod:`icml26.eval.tasks.r2g.tense`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from icml26.errors import described, input_error
from icml26.utils import IGNORE_INDEX
from icml26.validation import check_finite, check_int

__all__ = ["ANCHOR_OPS", "OPS", "AnchorData", "anchor_dataset", "anchor_decoder", "anchor_init", "count_parameters",
           "censored_median", "modular_dataset", "small_decoder", "steps_to"]

OPS = {"add": lambda a, b, p: (a + b) % p, "mul": lambda a, b, p: (a * b) % p}


# ---------------------------------------------------------------------------------------------
# Modular arithmetic
# ---------------------------------------------------------------------------------------------
def modular_dataset(p: int = 31, op: str = "add", train_fraction: float = 0.5, seed: int = 0):
    """All ``p * p`` pairs ``(a, b)`` of ``a op b mod p``, split into train and test by ``seed``.

    Tokens ``0..p-1`` are the numbers and ``p`` is ``=``; the vocabulary has ``p + 1`` tokens.
    Columns: ``a``, ``b``, ``answer``, ``input_ids`` (``[a, b, =, answer]``), ``labels``
    (``-100`` except the answer, predicted at ``=``) and ``r2g_mask`` (the operand positions).
    """
    from datasets import Dataset, DatasetDict

    if isinstance(p, bool) or not isinstance(p, int) or p < 2:
        raise input_error("modular_dataset", "p", "an int >= 2", p)
    if op not in OPS:
        raise input_error("modular_dataset", "op", f"one of {list(OPS)}", op)
    if isinstance(train_fraction, bool) or not isinstance(train_fraction, (int, float)) or not 0.0 < train_fraction < 1.0:
        raise input_error("modular_dataset", "train_fraction", "a number in (0, 1)", train_fraction)
    pairs = [(a, b) for a in range(p) for b in range(p)]
    order = torch.randperm(len(pairs), generator=torch.Generator().manual_seed(seed)).tolist()
    n_train = int(round(train_fraction * len(pairs)))

    def rows(indices):
        a = [pairs[i][0] for i in indices]
        b = [pairs[i][1] for i in indices]
        c = [OPS[op](x, y, p) for x, y in zip(a, b)]
        return {"a": a, "b": b, "answer": c,
                "input_ids": [[x, y, p, z] for x, y, z in zip(a, b, c)],
                "labels": [[IGNORE_INDEX, IGNORE_INDEX, IGNORE_INDEX, z] for z in c],
                "r2g_mask": [[1, 1, 0, 0]] * len(c)}

    return DatasetDict(train=Dataset.from_dict(rows(order[:n_train])), test=Dataset.from_dict(rows(order[n_train:])))


def small_decoder(p: int = 31, *, d_model: int = 64, n_heads: int = 4, d_mlp: int = 256, n_layers: int = 1,
                  layer_norm: bool = False, initializer_range: float | None = None, seed: int = 0):
    """A GPT-2 decoder for ``p + 1`` tokens and sequences of up to 4, in the style of Nanda et al.

    Token and position embeddings are drawn from ``N(0, d^-1/2)``. The linear
    layers get PyTorch's default ``U(+-1/sqrt(fan_in))`` (the scale of the progress-measures
    model) when ``initializer_range`` is None, else GPT-2's ``N(0, initializer_range)``.
    ``layer_norm=False`` (default) replaces the LayerNorms by identities, as in the
    progress-measures model; such a model lives in memory (``save_pretrained`` would reload the
    LayerNorms). Dropout is off and the unembedding is untied.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    fn = "small_decoder"
    check_int(fn, "p", p, low=2)
    _check_sizes(fn, d_model, n_heads, n_layers)
    check_int(fn, "d_mlp", d_mlp, low=1)
    if initializer_range is not None:
        check_finite(fn, "initializer_range", initializer_range, positive=True)
    config = GPT2Config(vocab_size=p + 1, n_positions=4, n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                        n_inner=d_mlp, activation_function="relu", resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, tie_word_embeddings=False, initializer_range=initializer_range or 0.02,
                        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    config._attn_implementation = "eager"  # the fastest for 3-token sequences on CPU
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(config)
        with torch.no_grad():
            model.transformer.wte.weight.normal_(0.0, d_model ** -0.5)
            model.transformer.wpe.weight.normal_(0.0, d_model ** -0.5)
            for module in model.modules() if initializer_range is None else ():
                if type(module).__name__ == "Conv1D" or isinstance(module, torch.nn.Linear):
                    # Conv1D stores [in, out], Linear [out, in]
                    fan_in = module.weight.shape[0 if type(module).__name__ == "Conv1D" else 1]
                    module.weight.uniform_(-fan_in ** -0.5, fan_in ** -0.5)
                    if getattr(module, "bias", None) is not None:
                        module.bias.uniform_(-fan_in ** -0.5, fan_in ** -0.5)
    if not layer_norm:
        for block in model.transformer.h:
            block.ln_1, block.ln_2 = torch.nn.Identity(), torch.nn.Identity()
        model.transformer.ln_f = torch.nn.Identity()
    return model


def _check_sizes(function: str, d_model, n_heads, n_layers) -> None:
    check_int(function, "d_model", d_model, low=1)
    check_int(function, "n_heads", n_heads, low=1)
    check_int(function, "n_layers", n_layers, low=1)
    if d_model % n_heads:
        raise input_error(function, "n_heads", f"a divisor of d_model={d_model}", n_heads)


def steps_to(steps: Sequence[int], values: Sequence[float], threshold: float = 0.95) -> int | None:
    """The first step whose value reaches ``threshold`` (None if none does)."""
    if len(values) != len(steps):
        raise input_error("steps_to", "values", f"one value per step ({len(steps)})",
                          described(f"{len(values)} values"))
    check_finite("steps_to", "threshold", threshold)
    return next((s for s, v in zip(steps, values) if v >= threshold), None)


def censored_median(steps: Sequence[float | int | None], cap: int) -> tuple[float, bool]:
    """The median of steps-to-target values right-censored at ``cap``: ``(value, censored)``.

    ``None`` or ``inf`` is a run that had not reached the target when it stopped at the cap: it ranks above
    every observed value (all of which are ``<= cap``). When the middle value (both middle values, for an
    even count) is observed the median is exact and ``censored`` is False; otherwise the median is only
    known to exceed ``value`` (``cap`` when the middle value is censored; the mean of the observed middle
    value and ``cap`` when one of two middle values is) and ``censored`` is True. Written by hand:
    ``statistics.median`` would average an infinity into the result, and no kept library takes censoring
    by a common cap.
    """
    check_int("censored_median", "cap", cap, low=1)
    if not len(steps):
        raise input_error("censored_median", "steps", "at least one value", described("none"))
    values = []
    for s in steps:
        if s is not None and not (isinstance(s, (int, float)) and not isinstance(s, bool) and (s >= 0)):
            raise input_error("censored_median", "steps", "non-negative numbers, None or inf (censored)", steps)
        if s is not None and math.isfinite(s) and s > cap:
            raise input_error("censored_median", "steps", f"observed values <= cap ({cap})", steps)
        values.append(math.inf if s is None else float(s))
    values.sort()
    n = len(values)
    middle = values[(n - 1) // 2: n // 2 + 1]
    observed = [v for v in middle if math.isfinite(v)]
    if len(observed) == len(middle):
        return sum(middle) / len(middle), False
    return (observed[0] + cap) / 2 if observed else float(cap), True


# ---------------------------------------------------------------------------------------------
# Grokfast's task: a op b mod 97, its 2-layer decoder and its minibatch Adam loop
# ---------------------------------------------------------------------------------------------
#: ``a op b mod p`` with the operand ranges Grokfast uses: ``b`` in ``1..p-1`` for ``mul`` (its
#: ``multiplication_mod_p_data``), ``0..p-1`` otherwise.
ANCHOR_OPS = {"mul": (lambda a, b, p: (a * b) % p, 1), "add": (lambda a, b, p: (a + b) % p, 0),
              "sub": (lambda a, b, p: (a - b) % p, 0)}


@dataclass
class AnchorData:
    """Token tensors of one :func:`anchor_dataset`: prompts ``[N, 4] = a op b =`` and answers ``[N]``.

    ``selection`` holds training pairs set aside to choose hyperparameters (empty unless asked for);
    ``shuffle_state`` is the RNG state the anchor's epoch shuffles continue from (see :func:`anchor_init`).
    """

    p: int
    op: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    x_selection: torch.Tensor
    y_selection: torch.Tensor
    shuffle_state: torch.Tensor

    @property
    def operand_positions(self) -> tuple[int, int]:
        return (0, 2)

    def for_selection(self) -> AnchorData:
        """Train on the training pairs minus the selection pairs, "test" on the selection pairs."""
        if not len(self.y_selection):
            raise input_error("AnchorData.for_selection", "selection", "a dataset built with selection_fraction > 0",
                              described("no selection pairs"))
        return dataclasses.replace(self, x_test=self.x_selection, y_test=self.y_selection,
                                   x_selection=self.x_selection[:0], y_selection=self.y_selection[:0])


def _grokfast_layout(p: int, d: int, n_layers: int, n_heads: int) -> torch.nn.Module:
    """Grokfast's decoder modules (ironjr/grokfast ``main.py``, ``Decoder``/``Block``), constructed in its
    order so that PyTorch's default initialisation draws the same numbers from the same seed. Only
    their weights are used (copied into the GPT-2 of :func:`anchor_decoder`)."""
    nn = torch.nn
    root = nn.Module()
    root.tok, root.pos = nn.Embedding(p + 2, d), nn.Embedding(5, d)
    root.blocks = nn.ModuleList()
    for _ in range(n_layers):
        block = nn.Module()
        block.ln_1, block.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        block.attn = nn.MultiheadAttention(d, n_heads)
        block.fc, block.proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        root.blocks.append(block)
    root.ln_f = nn.LayerNorm(d)
    root.head = nn.Linear(d, p + 2, bias=False)
    return root


def _check_anchor(function: str, p, op, d_model, n_layers, n_heads) -> None:
    check_int(function, "p", p, low=3)
    if op not in ANCHOR_OPS:
        raise input_error(function, "op", f"one of {list(ANCHOR_OPS)}", op)
    _check_sizes(function, d_model, n_heads, n_layers)


def anchor_init(p: int = 97, op: str = "mul", seed: int = 0, *, d_model: int = 128, n_layers: int = 2,
                n_heads: int = 4) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, torch.Tensor]:
    """What Grokfast's ``main.py`` draws after ``torch.manual_seed(seed)``, in its order, without touching
    the global RNG (``torch.random.fork_rng``): the decoder's initial weights (PyTorch defaults:
    embeddings ``N(0, 1)``, attention in-projection Xavier-uniform with zero biases, linear layers
    ``U(+-1/sqrt(fan_in))``), then the ``randperm`` of the pairs whose first half is the training set.

    Returns ``(modules, perm, pairs, shuffle_state)``: ``pairs`` ``[N, 2]`` in its order (``a`` outer,
    ``b`` inner), and the RNG state its epoch shuffles continue from.
    """
    _check_anchor("anchor_init", p, op, d_model, n_layers, n_heads)
    fn, low = ANCHOR_OPS[op]
    a, b = torch.cartesian_prod(torch.arange(p), torch.arange(low, p)).T
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        modules = _grokfast_layout(p, d_model, n_layers, n_heads)
        perm = torch.randperm(a.numel())
        state = torch.get_rng_state()
    return modules, perm, torch.stack([a, b], 1), state


def anchor_dataset(p: int = 97, op: str = "mul", train_fraction: float = 0.5, seed: int = 0, *,
                   selection_fraction: float = 0.0) -> AnchorData:
    """Grokfast's data (ironjr/grokfast ``main.py``): every pair of ``a op b mod p``, split by the
    ``randperm`` it draws after seeding ``seed`` (the same permutation for the same seed and sizes).

    Tokens ``0..p-1`` are numbers, ``p`` is ``=`` and ``p + 1`` the operator; prompts are ``a op b =``
    and the answer is predicted at ``=``. ``train_fraction=0.5`` is its split (the first ``N // 2`` of
    the permutation train); other fractions take the first ``round(f N)``. ``selection_fraction``
    moves that share of the training pairs (the last ones of the permutation's training part) to a
    selection split, for choosing hyperparameters without looking at the test pairs.
    """
    if isinstance(p, bool) or not isinstance(p, int) or p < 3:
        raise input_error("anchor_dataset", "p", "an int >= 3", p)
    if op not in ANCHOR_OPS:
        raise input_error("anchor_dataset", "op", f"one of {list(ANCHOR_OPS)}", op)
    for name, value, open_low in (("train_fraction", train_fraction, True), ("selection_fraction", selection_fraction, False)):
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not value < 1.0
                or not (value > 0.0 if open_low else value >= 0.0)):
            raise input_error("anchor_dataset", name, "a number in (0, 1)" if open_low else "a number in [0, 1)", value)
    _, perm, pairs, state = anchor_init(p, op, seed)
    n = perm.numel()
    n_train = n // 2 if train_fraction == 0.5 else int(round(train_fraction * n))
    n_select = int(round(selection_fraction * n_train))
    fn, _ = ANCHOR_OPS[op]

    def tensors(index):
        a, b = pairs[index, 0], pairs[index, 1]
        prompt = torch.stack([a, torch.full_like(a, p + 1), b, torch.full_like(a, p)], 1)
        return prompt, fn(a, b, p)

    x_train, y_train = tensors(perm[:n_train - n_select])
    x_sel, y_sel = tensors(perm[n_train - n_select:n_train])
    x_test, y_test = tensors(perm[n_train:])
    return AnchorData(p, op, x_train, y_train, x_test, y_test, x_sel, y_sel, state)


def _normalise_stream(block, args):
    return (block.ln_stream(args[0]),) + tuple(args[1:])


def anchor_decoder(p: int = 97, op: str = "mul", seed: int = 0, *, d_model: int = 128, n_layers: int = 2,
                   n_heads: int = 4, block: str = "grokfast"):
    """Grokfast's 2-layer decoder (width 128, 4 heads, GELU MLP of 4x width, LayerNorm, 5 positions,
    untied head without bias) as a ``GPT2LMHeadModel`` built from a ``GPT2Config``, so R2G's hooks find
    its value projections as on any HF decoder; 422,784 parameters at p = 97, as Grokfast's.

    The initial weights are Grokfast's own for ``seed`` (:func:`anchor_init`), copied into GPT-2's
    layout (``Conv1D`` stores ``[in, out]``). ``block="grokfast"`` (default) gives Grokfast's block,
    which normalises the residual stream itself (``x = ln_1(x); x = x + attn(x); x = x + mlp(ln_2(x))``):
    GPT-2's ``ln_1`` becomes an identity and the LayerNorm moves to ``ln_stream``, applied to the
    block's input by a forward pre-hook (such a model lives in memory: ``save_pretrained`` would not
    restore the hook). ``block="gpt2"`` keeps GPT-2's pre-LayerNorm block (``x + attn(ln_1(x))``),
    which needs ~1.3x more steps to grok with the Grokfast filter (seeds 0-2: 1250, 930, 1330 steps).
    Dropout is off.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    _check_anchor("anchor_decoder", p, op, d_model, n_layers, n_heads)
    if block not in ("grokfast", "gpt2"):
        raise input_error("anchor_decoder", "block", "'grokfast' or 'gpt2'", block)
    config = GPT2Config(vocab_size=p + 2, n_positions=5, n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                        n_inner=4 * d_model, activation_function="gelu", resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, tie_word_embeddings=False, layer_norm_epsilon=1e-5,
                        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    config._attn_implementation = "eager"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # GPT-2's own init, overwritten below
        model = GPT2LMHeadModel(config)
    ref, _, _, _ = anchor_init(p, op, seed, d_model=d_model, n_layers=n_layers, n_heads=n_heads)
    t = model.transformer
    with torch.no_grad():
        t.wte.weight.copy_(ref.tok.weight)
        t.wpe.weight.copy_(ref.pos.weight)
        for layer, src in zip(t.h, ref.blocks):
            layer.ln_1.load_state_dict(src.ln_1.state_dict())
            layer.ln_2.load_state_dict(src.ln_2.state_dict())
            layer.attn.c_attn.weight.copy_(src.attn.in_proj_weight.T)
            layer.attn.c_attn.bias.copy_(src.attn.in_proj_bias)
            layer.attn.c_proj.weight.copy_(src.attn.out_proj.weight.T)
            layer.attn.c_proj.bias.copy_(src.attn.out_proj.bias)
            layer.mlp.c_fc.weight.copy_(src.fc.weight.T)
            layer.mlp.c_fc.bias.copy_(src.fc.bias)
            layer.mlp.c_proj.weight.copy_(src.proj.weight.T)
            layer.mlp.c_proj.bias.copy_(src.proj.bias)
        t.ln_f.load_state_dict(ref.ln_f.state_dict())
        model.lm_head.weight.copy_(ref.head.weight)
    if block == "grokfast":
        for layer in t.h:
            layer.ln_stream, layer.ln_1 = layer.ln_1, torch.nn.Identity()
            layer.register_forward_pre_hook(_normalise_stream)
    return model


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


