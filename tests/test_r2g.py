"""Tests of R2G (icml26.training.r2g.loss), its grokking tasks (icml26.eval.tasks.r2g.modular) and experiment."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from icml26.errors import InputError
from icml26.training.r2g import GrokfastEMA
from icml26.training.r2g import R2GLoss, find_value_projections, r2g_distance, r2g_term, random_pairing, value_geometry
from icml26.training.r2g import R2GCallback, R2GConfig, R2GTrainer, R2GTrainingArguments, alpha_at

SWAP = torch.tensor([1, 0])


def _llama(vocab=48, hidden=16, layers=2, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=32, num_hidden_layers=layers,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32,
                         bos_token_id=None, eos_token_id=None, pad_token_id=0)
    return LlamaForCausalLM(config)


def _gpt2(vocab=40, hidden=24, seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=vocab, n_positions=16, n_embd=hidden, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=None, eos_token_id=None)
    return GPT2LMHeadModel(config).eval()


# --- the term: closed forms, sign, edge cases ----------------------------------------------------
def test_closed_forms_of_the_term():
    v = torch.tensor([[[0.0, 0.0]], [[3.0, 4.0]]])
    assert r2g_distance(v, perm=SWAP, reduction="sum").item() == pytest.approx(10.0)
    assert r2g_term(v, perm=SWAP, reduction="sum").item() == pytest.approx(0.1)
    assert r2g_term(v, perm=SWAP, reduction="mean").item() == pytest.approx(0.2)  # D = 5
    assert r2g_term(v, perm=SWAP, reduction="sum", form="negative").item() == pytest.approx(-10.0)
    u = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    assert r2g_distance(u, perm=SWAP, reduction="sum", distance="angular").item() == pytest.approx(2.0)
    assert r2g_term(u, perm=SWAP, reduction="sum", distance="angular").item() == pytest.approx(0.5)
    assert r2g_term(u, perm=SWAP, reduction="sum", distance="cosine").item() == pytest.approx(0.5)  # the alias
    # fp16 input, fp32 result; the default pairing of two examples is the swap
    assert r2g_term(v.half(), reduction="sum").dtype == torch.float32
    assert r2g_term(v, reduction="sum").item() == pytest.approx(0.1)


def test_the_loss_applies_alpha_and_the_layer_weights():
    model = _llama(layers=2)
    ids = torch.randint(1, 48, (4, 6))
    with R2GLoss(model, alpha=0.5, layer_weights=[0.25, 0.75], reduction="sum") as r2g:
        model(input_ids=ids)
        perm = torch.tensor([1, 2, 3, 0])
        D = sum(w * r2g_distance(r2g.values[i], perm=perm, reduction="sum") for i, w in enumerate([0.25, 0.75]))
        assert r2g.compute(perm=perm).item() == pytest.approx(1 / D.item(), rel=1e-6)
        assert r2g(perm=perm).item() == pytest.approx(0.5 / D.item(), rel=1e-6)


@pytest.mark.parametrize("distance", ["euclidean", "angular"])
def test_a_step_on_the_term_alone_increases_the_distance(distance):
    torch.manual_seed(0)
    v = torch.randn(8, 3, 5, requires_grad=True)
    perm = random_pairing(8, generator=torch.Generator().manual_seed(1))
    before = r2g_distance(v, perm=perm, distance=distance).item()
    r2g_term(v, perm=perm, distance=distance).backward()
    with torch.no_grad():
        v -= 0.5 * v.grad
    assert r2g_distance(v, perm=perm, distance=distance).item() > before


def test_batch_of_one_empty_mask_and_identical_values_give_zero():
    v = torch.randn(1, 4, 3, requires_grad=True)
    t = r2g_term(v)
    assert t.item() == 0.0
    t.backward()  # still differentiable, with a zero gradient
    assert torch.count_nonzero(v.grad) == 0
    assert r2g_term(torch.randn(3, 4, 2), position_mask=torch.zeros(4, dtype=torch.bool)).item() == 0.0
    same = torch.ones(4, 2, 3, requires_grad=True)
    term = r2g_term(same)
    term.backward()
    assert term.item() == 0.0 and torch.isfinite(same.grad).all()


def test_random_pairing_is_a_derangement():
    for n in (2, 3, 8, 33):
        perm = random_pairing(n, generator=torch.Generator().manual_seed(n))
        assert sorted(perm.tolist()) == list(range(n))
        assert (perm != torch.arange(n)).all()


def test_per_example_masks_pair_the_kth_selected_positions():
    values = torch.zeros(2, 4, 1)
    values[0, 1], values[0, 2] = 1.0, 2.0  # example 0 selects positions 1, 2
    values[1, 2], values[1, 3] = 5.0, 9.0  # example 1 (left-padded by one) selects positions 2, 3
    mask = torch.tensor([[0, 1, 1, 0], [0, 0, 1, 1]]).bool()
    # slot 0: |1 - 5| twice, slot 1: |2 - 9| twice (sum over the batch), D = mean over slots
    assert r2g_distance(values, position_mask=mask, perm=SWAP, reduction="sum").item() == pytest.approx((8 + 14) / 2)


def test_value_geometry_is_the_mean_pairwise_cosine_distance():
    torch.manual_seed(0)
    x = torch.randn(6, 1, 4)
    unit = F.normalize(x[:, 0], dim=-1)
    cos = unit @ unit.T
    expected = (1 - cos[~torch.eye(6, dtype=torch.bool)]).mean().item()
    got = value_geometry(x)
    assert got["angular_dist"] == pytest.approx(expected, rel=1e-5)
    assert got["v_norm"] == pytest.approx(x.norm(dim=-1).mean().item(), rel=1e-5)


# --- hooks ----------------------------------------------------------------------------------------
def test_gpt2_hooks_take_the_value_third_of_c_attn():
    model = _gpt2()
    ids = torch.randint(0, 40, (3, 5))
    block = model.transformer.h[1]
    seen = {}
    block.attn.register_forward_hook(lambda m, a, kw, out: seen.__setitem__("x", kw.get("hidden_states", a[0] if a
                                     else None)), with_kwargs=True)
    with R2GLoss(model, layers=[1]) as r2g:
        model(input_ids=ids)
        v = r2g.values[0]
    assert v.shape == (3, 5, 24)
    expected = block.attn.c_attn(seen["x"]).split(24, dim=-1)[2]
    torch.testing.assert_close(v, expected)
    assert [name for name, _, _ in find_value_projections(model)] == ["transformer.h.0.attn.c_attn",
                                                                      "transformer.h.1.attn.c_attn"]


def test_hooks_do_not_change_outputs_and_are_removed():
    model = _llama().eval()
    ids = torch.randint(1, 48, (2, 7))
    ref = model(input_ids=ids).logits
    r2g = R2GLoss(model)
    modules = [m for _, m, _ in r2g.targets]
    assert all(len(m._forward_hooks) == 1 for m in modules)
    torch.testing.assert_close(model(input_ids=ids).logits, ref, rtol=0, atol=0)
    assert len(r2g.values) == 2
    r2g.remove()
    assert all(len(m._forward_hooks) == 0 for m in modules) and not r2g.values
    with R2GLoss(model) as again:
        assert again.attached
    assert not again.attached and all(len(m._forward_hooks) == 0 for m in modules)


def test_alpha_zero_is_plain_cross_entropy():
    ids = torch.randint(1, 48, (4, 8))
    model = _llama()
    ce_model = _llama()
    ce_model.load_state_dict(model.state_dict())
    with R2GLoss(model, alpha=0.0) as r2g:
        loss = model(input_ids=ids, labels=ids).loss + r2g()
        loss.backward()
    ref = ce_model(input_ids=ids, labels=ids).loss
    ref.backward()
    assert abs(loss.item() - ref.item()) <= 1e-7
    for (name, p), q in zip(model.named_parameters(), ce_model.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-7, msg=name)
    # and the reverse: alpha > 0 changes the loss
    with R2GLoss(model, alpha=0.1) as r2g:
        assert (model(input_ids=ids, labels=ids).loss + r2g()).item() > ref.item()


def test_positions_excluded_by_r2g_mask_receive_no_gradient():
    model = _llama(layers=1)
    embeds = model.get_input_embeddings()(torch.randint(1, 48, (4, 6))).detach().requires_grad_(True)
    mask = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [1, 0, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0]]).bool()
    attention = torch.ones(4, 6, dtype=torch.long)
    attention[3, 1] = 0  # padding is never repelled, even when the mask selects it
    with R2GLoss(model, alpha=1.0) as r2g:
        model(inputs_embeds=embeds, attention_mask=attention)
        term = r2g(position_mask=mask, attention_mask=attention)
        (grad,) = torch.autograd.grad(term, embeds)
    # V of the only (first) layer at position i depends on the input at i alone
    selected = (mask & attention.bool()).unsqueeze(-1)
    assert torch.count_nonzero(grad * ~selected) == 0
    assert (grad.abs().sum(-1)[selected.squeeze(-1)] > 0).all()


# --- configuration, schedules, Grokfast ----------------------------------------------------------
@pytest.mark.parametrize("kwargs, words", [
    ({"distance": "manhattan"}, ["distance", "euclidean", "manhattan"]),
    ({"layers": [2]}, ["layers", "[-2, 1]", "2"]),
    ({"alpha": -0.1}, ["R2GLoss: alpha: expected", "non-negative", "-0.1"]),
    ({"form": "square"}, ["form", "inverse", "square"]),
    ({"reduction": "max"}, ["reduction", "max"]),
    ({"layer_weights": [1.0]}, ["layer_weights", "2", "1"]),
    ({"positions": [-1]}, ["positions", "-1"]),
])
def test_bad_configuration_raises_a_clear_error(kwargs, words):
    with pytest.raises(InputError) as info:
        R2GLoss(_llama(layers=2), **kwargs)
    for word in words:
        assert word in str(info.value)


def test_bad_config_fields_and_unsupported_models():
    with pytest.raises(InputError, match="R2GConfig: r2g_distance: expected one of"):
        R2GConfig(r2g_distance="l1")
    with pytest.raises(InputError, match="R2GConfig: r2g_alpha: expected"):
        R2GConfig(r2g_alpha=-1.0)
    with pytest.raises(InputError, match="R2GConfig: r2g_alpha: expected"):
        R2GConfig(r2g_alpha=float("nan"))
    with pytest.raises(InputError, match="R2GConfig: r2g_schedule: expected"):
        R2GConfig(r2g_schedule="step")
    with pytest.raises(InputError, match="find_value_projections: model: expected value projections named 'v_proj'"):
        R2GLoss(torch.nn.Linear(2, 2))
    with pytest.raises(InputError, match=r"r2g_distance: values: expected a floating \[B, S, d\] tensor, got a float"):
        r2g_term(torch.randn(4, 3))
    with pytest.raises(InputError, match=r"r2g_distance: perm: expected a permutation of range\(3\), got \[0, 0, 1\]"):
        r2g_term(torch.randn(3, 2, 2), perm=torch.tensor([0, 0, 1]))
    with pytest.raises(InputError, match=r"r2g_distance: perm: expected a permutation of range\(3\), got a int64"):
        r2g_term(torch.randn(3, 2, 2), perm=torch.tensor([0, 1]))


def test_nan_values_give_a_nan_term_not_zero():
    nan = torch.full((4, 3, 2), float("nan"))
    for distance in ("euclidean", "angular"):
        assert math.isnan(r2g_term(nan, distance=distance).item())
        assert math.isnan(r2g_term(nan, distance=distance, form="negative").item())
    partly = torch.randn(4, 3, 2)
    partly[1, 2, 0] = float("nan")
    assert math.isnan(r2g_term(partly).item())
    # still 0, with a finite gradient, when there is nothing to repel
    same = torch.ones(4, 3, 2, requires_grad=True)
    term = r2g_term(same)
    term.backward()
    assert term.item() == 0.0 and torch.isfinite(same.grad).all()


def test_the_face_exports_the_trainers_lazily_and_keeps_trl_unloaded():
    """``icml26.training.r2g`` is the one import path; its trainers load transformers/TRL on first use."""
    import subprocess
    import sys

    import icml26.training.r2g as face
    import icml26.training.r2g.grokfast as grokfast
    import icml26.training.r2g.sft as sft
    import icml26.training.r2g.trainer as trainer

    for name in ("R2GCallback", "R2GConfig", "R2GDataCollator", "R2GTrainer", "R2GTrainerMixin",
                 "R2GTrainingArguments", "alpha_at"):
        assert getattr(face, name) is getattr(trainer, name)
    assert face.R2GSFTTrainer is sft.R2GSFTTrainer and face.R2GSFTConfig is sft.R2GSFTConfig
    assert face.GrokfastEMA is grokfast.GrokfastEMA and face.GrokfastCallback is grokfast.GrokfastCallback
    assert set(face.__all__) >= {"R2GLoss", "R2GTrainer", "GrokfastEMA", "train_grokking", "R2GSFTTrainer"}
    code = "import sys, icml26.training.r2g as f; f.R2GLoss; print('trl' in sys.modules, 'transformers.trainer' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_config_parses_with_hf_argument_parser():
    from transformers import HfArgumentParser

    (cfg,) = HfArgumentParser(R2GConfig).parse_args_into_dataclasses(
        ["--r2g_alpha", "0.01", "--r2g_distance", "angular", "--r2g_layers", "0", "1", "--r2g_schedule", "linear"])
    assert (cfg.r2g_alpha, cfg.r2g_distance, cfg.r2g_layers, cfg.r2g_schedule) == (0.01, "angular", [0, 1], "linear")
    (args,) = HfArgumentParser(R2GTrainingArguments).parse_args_into_dataclasses(
        ["--output_dir", "/tmp/x", "--r2g_alpha", "0.2", "--learning_rate", "0.5", "--r2g_positions", "0", "1"])
    assert args.r2g_alpha == 0.2 and args.learning_rate == 0.5 and args.r2g_kwargs()["positions"] == [0, 1]


def test_schedule_endpoints():
    assert alpha_at(0, alpha=0.08) == alpha_at(10**6, alpha=0.08) == 0.08
    assert alpha_at(0, alpha=0.08, schedule="linear", warmup_steps=100) == 0.0
    assert alpha_at(50, alpha=0.08, schedule="linear", warmup_steps=100) == pytest.approx(0.04)
    assert alpha_at(100, alpha=0.08, schedule="linear", warmup_steps=100) == 0.08
    assert alpha_at(10**5, alpha=0.08, schedule="linear", warmup_steps=100) == 0.08
    assert alpha_at(0, alpha=0.08, schedule="cosine", warmup_steps=10, total_steps=110) == 0.0
    assert alpha_at(10, alpha=0.08, schedule="cosine", warmup_steps=10, total_steps=110) == 0.08
    assert alpha_at(60, alpha=0.08, schedule="cosine", warmup_steps=10, total_steps=110) == pytest.approx(0.04)
    assert alpha_at(110, alpha=0.08, schedule="cosine", warmup_steps=10, total_steps=110) == pytest.approx(0.0)
    callback = R2GCallback(schedule="linear", warmup_steps=4).bind(R2GLoss(_llama(), alpha=0.3))

    class State:
        global_step, max_steps = 0, 10

    callback.on_step_begin(None, State, None)
    assert callback.r2g.alpha == 0.0
    State.global_step = 4
    callback.on_step_begin(None, State, None)
    assert callback.r2g.alpha == 0.3


def test_grokfast_ema_follows_the_reference_rule():
    model = torch.nn.Linear(3, 1, bias=False)
    filt = GrokfastEMA(alpha=0.9, lamb=2.0)
    g1, g2 = torch.tensor([[1.0, 0.0, 2.0]]), torch.tensor([[0.0, 1.0, -1.0]])
    model.weight.grad = g1.clone()
    filt(model)
    torch.testing.assert_close(model.weight.grad, g1 + 2.0 * g1)  # the EMA starts at the first gradient
    model.weight.grad = g2.clone()
    filt(model)
    torch.testing.assert_close(model.weight.grad, g2 + 2.0 * (0.9 * g1 + 0.1 * g2))
    with pytest.raises(InputError, match=r"GrokfastEMA: alpha: expected a number in \[0, 1\), got 1.0"):
        GrokfastEMA(alpha=1.0)


# --- trainers -------------------------------------------------------------------------------------
def test_trainer_gradient_accumulation_uses_the_mean_term(tmp_path):
    """2 micro-batches of 2 (the pairing of two is always the swap): the update equals one SGD step on
    mean over micro-batches of (token-mean CE + alpha * term)."""
    from datasets import Dataset

    torch.manual_seed(0)
    ids = torch.randint(1, 48, (4, 6))
    mask = [[1, 1, 1, 0, 0, 0]] * 4
    data = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist(), "attention_mask": [[1] * 6] * 4,
                              "r2g_mask": mask})
    model, ref = _llama(), _llama()
    ref.load_state_dict(model.state_dict())
    args = R2GTrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, gradient_accumulation_steps=2,
                                max_steps=1, learning_rate=1.0, optim="sgd", lr_scheduler_type="constant",
                                weight_decay=0.0, max_grad_norm=0.0, report_to=[], save_strategy="no",
                                use_cpu=True, disable_tqdm=True, r2g_alpha=0.5)
    trainer = R2GTrainer(model=model, args=args, train_dataset=data)
    batches = []
    collate = trainer.data_collator
    trainer.data_collator = lambda examples: batches.append(collate(examples)) or batches[-1]
    trainer.train()
    assert len(batches) == 2 and all(b["r2g_mask"].shape == (2, 6) for b in batches)
    with R2GLoss(ref, alpha=0.5) as r2g:
        total = 0.0
        for batch in batches:
            ce = ref(input_ids=batch["input_ids"], labels=batch["labels"]).loss
            total = total + 0.5 * (ce + r2g(position_mask=batch["r2g_mask"]))
            r2g.clear()
        total.backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), (q - q.grad).detach(), rtol=1e-5, atol=1e-6, msg=name)


def test_sft_trainer_trains_a_tiny_qwen3_and_logs(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from icml26.eval.tasks.r2g import tense_accuracy, tense_dataset, tense_tokenize
    from icml26.training.r2g import tense_trainer
    from icml26.tiny import build_tiny_model

    path = build_tiny_model("qwen3")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    data = tense_dataset(n_train=64, n_val=16, n_ood=16, seed=0)
    train = tense_tokenize(data["train"], tokenizer)
    assert all(sum(m) == 5 for m in train["r2g_mask"])
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = tense_trainer(model, tokenizer, train, output_dir=tmp_path, max_steps=6, logging_steps=3,
                            r2g_layers=[0, 1], r2g_schedule="linear", r2g_warmup_steps=2, activation_checkpointing=True)
    assert type(trainer).__name__ == "R2GSFTTrainer" and len(trainer.r2g.targets) == 2
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert logs, trainer.state.log_history
    for key in ("r2g/term", "r2g/angular_dist", "r2g/v_norm", "r2g/alpha"):
        assert key in logs[-1] and math.isfinite(logs[-1][key]), (key, logs[-1])
    assert logs[-1]["r2g/alpha"] == pytest.approx(0.08) and logs[-1]["r2g/term"] > 0
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    assert not trainer.r2g.values  # nothing held between steps
    scores = tense_accuracy(model, tense_tokenize(data["ood"], tokenizer), pad_token_id=tokenizer.pad_token_id)
    assert 0.0 <= scores["exact_match"] <= scores["token_accuracy"] <= 1.0


# --- tasks and analysis ---------------------------------------------------------------------------
def test_modular_datasets_are_seeded_and_correct():
    from icml26.eval.tasks.r2g import modular_dataset
    from icml26.training.r2g.loops import modular_tensors

    a = modular_dataset(7, "mul", 0.5, seed=3)
    assert (len(a["train"]), len(a["test"])) == (24, 25)
    assert a["train"]["input_ids"] == modular_dataset(7, "mul", 0.5, seed=3)["train"]["input_ids"]
    assert a["train"]["input_ids"] != modular_dataset(7, "mul", 0.5, seed=4)["train"]["input_ids"]
    for row in a["train"]:
        assert row["answer"] == row["a"] * row["b"] % 7 and row["input_ids"] == [row["a"], row["b"], 7, row["answer"]]
    pairs = {(r["a"], r["b"]) for split in ("train", "test") for r in a[split]}
    assert len(pairs) == 49
    x, y = modular_tensors(a["test"])
    assert x.shape == (25, 3) and (x[:, 2] == 7).all() and y.shape == (25,)
    with pytest.raises(InputError, match="modular_dataset: op: expected one of"):
        modular_dataset(7, "div")


def test_fourier_sparsity_separates_a_clock_from_noise():
    from icml26.training.r2g.loops import fourier_sparsity

    p = 31
    a = torch.arange(p, dtype=torch.float32)[:, None]
    clock = torch.cat([torch.cos(2 * math.pi * 3 * a / p), torch.sin(2 * math.pi * 3 * a / p)], 1)
    noise = torch.randn(p, 16, generator=torch.Generator().manual_seed(0))
    assert fourier_sparsity(clock)["top_fraction"] == pytest.approx(1.0, abs=1e-5)
    assert fourier_sparsity(clock)["gini"] > 0.9 > fourier_sparsity(noise)["gini"]


def test_tense_ood_split_holds_the_attractors():
    from icml26.eval.tasks.r2g import NOUNS, tense_dataset

    data = tense_dataset(n_train=200, n_val=20, n_ood=50, seed=1)
    number = {word: plural for pair in NOUNS for plural, word in enumerate(pair)}

    def numbers(prompt):  # grammatical number of each noun, in order
        return [number[w] for w in prompt.split() if w in number]

    assert all(len(set(numbers(r["prompt"]))) == 1 for r in data["train"])
    assert all(len(set(numbers(r["prompt"]))) == 2 for r in data["ood"])
    row = data["ood"][0]
    assert row["prompt"].endswith(" =>") and row["completion"].startswith(" the ")


def test_p31_setting_end_to_end_reduced(tmp_path):
    """The secondary p=31 setting with two arms for 200 steps: R2G lowers its own 1/D below what cross-entropy
    training leaves, and the geometry claim's direction holds."""
    import dataclasses

    from icml26.eval.experiments.r2g import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    p31 = SETTINGS["quick"].p31
    assert p31.steps == p31.budget == 1500 and SETTINGS["full"].p31.steps == 20_000
    p31 = dataclasses.replace(p31, steps=200, budget=200, arms=("cross-entropy", "R2G"), eval_every=100)
    settings = dataclasses.replace(SETTINGS["quick"], task="p31", p31=p31)
    result = run_experiment(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path, device="cpu"), settings)
    names = [c.statement for c in result.claims]
    assert len(names) == 2 and "test accuracy" in names[0] and "angular" in names[1]
    assert result.claims[1].holds, result.claims[1].to_dict()
    assert {row["arm"] for row in result.tables["arms"]} == {"cross-entropy", "R2G"}
    assert set(result.figures) == {"accuracy_curves", "geometry"}
    assert (tmp_path / result.metrics["curves_file"]).is_file()
    assert result.metrics["R2G/train_acc_budget"] > 0.5
    assert result.metrics["R2G/r2g_term_budget"] < result.metrics["cross-entropy/r2g_term_budget"]
