"""R-GRPO (icml26.training.optminer): masking of retrieved tokens, group advantages, rewards, config, CPU steps."""

import math

import pytest
import torch

from icml26.training.optminer import (
    RGRPOConfig, RGRPOTrainer, align_tool_mask, check_tool_mask, extract_answer, group_advantages,
    make_answer_reward, make_retrieval_bonus, numeric_match, tool_result_spans,
)

GOLD = "Plant K7 makes 37 units per shift."


def search(query: str) -> str:
    """Search the plant documents.

    Args:
        query: keywords
    """
    return f"Document 1: [K7-cap] Plant K7 capacity\n{GOLD}" if "K7" in query else "No document matched the query."


# -- pure pieces -------------------------------------------------------------------------------
def test_answer_reward_uses_relative_tolerance_and_format_term():
    reward = make_answer_reward(tolerance=1e-4)
    completions = [[{"role": "assistant", "content": "<answer>12.0</answer>"}],
                   [{"role": "assistant", "content": "<answer>11.9</answer>"}],
                   [{"role": "assistant", "content": "12"}],  # no tag: not an answer
                   [{"role": "tool", "content": "<answer>12</answer>"},  # tool text is not the model's answer
                    {"role": "assistant", "content": "<answer>1,2</answer>"}]]
    assert reward(completions=completions, answer=[12.0] * 4) == [1.0, 0.0, 0.0, 1.0]
    with_format = make_answer_reward(format_weight=0.1)
    assert with_format(completions=completions[:3], answer=[12.0] * 3) == [1.1, 0.1, 0.0]
    assert numeric_match(370.0, 370) and not numeric_match(369.0, 370) and not numeric_match(None, 1)
    assert numeric_match(100.001, 100, tolerance=1e-4) and not numeric_match(100.1, 100, tolerance=1e-4)
    assert extract_answer("a <answer>x</answer> b <answer> -3.5e1 </answer>") == -35.0
    with pytest.raises(KeyError, match="answer"):
        reward(completions=completions, target=[1.0] * 4)


def test_retrieval_bonus_only_when_gold_document_in_a_tool_turn():
    bonus = make_retrieval_bonus(0.25, gold_column="gold_doc")
    hit = [{"role": "assistant", "content": ""}, {"role": "tool", "content": search("K7")},
           {"role": "assistant", "content": "<answer>37</answer>"}]
    miss = [{"role": "assistant", "content": f"{GOLD}"}]  # quoting the document itself earns nothing
    assert bonus(completions=[hit, miss], gold_doc=["[K7-cap]", "[K7-cap]"]) == [0.25, 0.0]
    with pytest.raises(ValueError, match="bonus"):
        make_retrieval_bonus(-1.0)


def test_group_advantages_for_rewards_1001():
    rewards = [1.0, 0.0, 0.0, 1.0]
    std = torch.tensor(rewards).std().item()  # unbiased, as TRL
    adv = group_advantages(rewards, num_generations=4, scale_rewards="group")
    assert torch.allclose(adv, torch.tensor([0.5, -0.5, -0.5, 0.5]) / (std + 1e-4))
    assert abs(adv.sum().item()) < 1e-6 and math.isclose(adv[0].item(), 0.5 / (std + 1e-4), rel_tol=1e-6)
    assert torch.allclose(group_advantages(rewards, 4, scale_rewards="none"), torch.tensor([0.5, -0.5, -0.5, 0.5]))
    two_groups = group_advantages([1.0, 0.0, 3.0, 3.0], 2, scale_rewards="group")
    assert torch.allclose(two_groups, torch.tensor([0.7071, -0.7071, 0.0, 0.0]) / (1 + 1.4e-4), atol=1e-3)
    with pytest.raises(ValueError, match="num_generations"):
        group_advantages(rewards, 3)
    with pytest.raises(ValueError, match="scale_rewards"):
        group_advantages(rewards, 4, scale_rewards="global")


def test_tool_mask_guard_issue_5144():
    ids = [[1, 2, 3, 4], [5, 6]]
    assert align_tool_mask(ids, [[1, 0, 0, 1], [1, 1]]) == [[1, 0, 0, 1], [1, 1]]
    with pytest.raises(ValueError, match="5144.*|completion 0 has 5 entries"):
        align_tool_mask(ids, [[1, 0, 0, 1, 1], [1, 1]])
    assert align_tool_mask(ids, [[1, 0, 0, 1, 1], [1]], policy="repair") == [[1, 0, 0, 1], [1, 0]]
    assert tool_result_spans([1, 0, 0, 1, 0, 1, 0]) == [(1, 3), (4, 5), (6, 7)]
    turns = [{"role": "assistant"}, {"role": "tool"}, {"role": "assistant"}]
    check_tool_mask([[1, 0, 0, 1]], [turns])
    with pytest.raises(ValueError, match="1 tool turn"):
        check_tool_mask([[1, 1, 1, 1]], [turns])


@pytest.mark.parametrize("explicit", [True, False])
def test_explicit_use_vllm_wins_over_auto(tmp_path, explicit):
    cfg = RGRPOConfig(output_dir=str(tmp_path), use_cpu=True, use_vllm=explicit)
    assert cfg.generation_backend == "auto" and cfg.use_vllm is explicit
    from transformers import HfArgumentParser

    (parsed,) = HfArgumentParser(RGRPOConfig).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--use_cpu", "true", "--use_vllm", str(explicit).lower()])
    assert parsed.use_vllm is explicit


def test_auto_decides_use_vllm_only_when_unset(tmp_path):
    import importlib.util

    import torch

    expected = bool(importlib.util.find_spec("vllm")) and torch.cuda.is_available()
    assert RGRPOConfig(output_dir=str(tmp_path), use_cpu=True).use_vllm is expected
    assert RGRPOConfig(output_dir=str(tmp_path), use_cpu=True, generation_backend="transformers").use_vllm is False


def test_config_from_hf_argument_parser(tmp_path):
    from transformers import HfArgumentParser

    (cfg,) = HfArgumentParser(RGRPOConfig).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--retrieval_bonus", "0.5", "--reward_tolerance", "1e-6",
         "--format_reward", "0.1", "--tool_mask_mismatch", "repair", "--generation_backend", "transformers",
         "--num_generations", "4", "--max_tool_calling_iterations", "2", "--use_cpu", "true"])
    assert (cfg.retrieval_bonus, cfg.reward_tolerance, cfg.format_reward) == (0.5, 1e-6, 0.1)
    assert cfg.tool_mask_mismatch == "repair" and cfg.use_vllm is False and cfg.max_tool_calling_iterations == 2
    assert RGRPOConfig(output_dir=str(tmp_path), use_cpu=True).retrieval_bonus == 0.0  # off by default


@pytest.mark.parametrize("kwargs, match", [
    ({"retrieval_bonus": -0.1}, "retrieval_bonus: expected a finite number >= 0"),
    ({"reward_tolerance": 0.0}, "reward_tolerance: expected a relative tolerance > 0"),
    ({"format_reward": float("nan")}, "format_reward"),
    ({"tool_mask_mismatch": "ignore"}, "tool_mask_mismatch: expected one of"),
    ({"generation_backend": "tpu"}, "generation_backend: expected one of"),
    ({"generation_backend": "transformers", "use_vllm": True}, "use_vllm: expected False"),
    ({"generation_backend": "vllm", "use_vllm": False}, "use_vllm: expected True"),
])
def test_bad_config_is_rejected_clearly(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        RGRPOConfig(output_dir=str(tmp_path), use_cpu=True, **kwargs)


# -- with TRL's GRPOTrainer --------------------------------------------------------------------
G = 4
TOOL_CALL = '<think>find K7</think>\n<tool_call>\n{"name": "search", "arguments": {"query": "plant K7"}}\n</tool_call>'
ANSWERS = ["<answer>370</answer>", "<answer>12</answer>", "<answer>5</answer>", "<answer>370</answer>"]


@pytest.fixture(scope="module")
def tiny_qwen3():
    from icml26.tiny import build_tiny_model

    return build_tiny_model("qwen3", max_position_embeddings=1024)


def _trainer(path, tmp_path, *, beta=0.0, retrieval_bonus=0.0, max_steps=1):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    prompt = [{"role": "user", "content": "Plant K7 runs 10 shifts. How many units?"}]
    data = Dataset.from_list([{"prompt": prompt, "answer": 370.0, "gold_doc": "[K7-cap]"}] * 8)
    args = RGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=G, num_generations=G,
                       max_completion_length=160, max_steps=max_steps, learning_rate=1e-3, beta=beta,
                       retrieval_bonus=retrieval_bonus, max_tool_calling_iterations=1, report_to=[],
                       save_strategy="no", use_cpu=True, gradient_checkpointing=False, logging_steps=1,
                       disable_tqdm=True, seed=0)
    return RGRPOTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer, tools=[search])


def _script_first_turns(trainer):
    """The policy is random, so its first turn is replaced by a scripted tool call and, after the tool result, its
    answer by rollout i's entry of ANSWERS (correct for rollouts 0 and 3: rewards [1, 0, 0, 1]). Everything
    else (executing the tool, appending its ids, the tool mask, rewards, advantages, the loss) is TRL's code."""
    tok = trainer.processing_class
    real = trainer._generate_single_turn

    def scripted(prompt_ids, *args, **kwargs):
        ids, logprobs = real(prompt_ids, *args, **kwargs)  # the real transformers generation runs too
        first_turn = not any("<tool_response>" in tok.decode(p) for p in prompt_ids)
        texts = [TOOL_CALL] * len(ids) if first_turn else [ANSWERS[i % G] for i in range(len(ids))]
        return [tok(t + tok.eos_token)["input_ids"] for t in texts], logprobs

    trainer._generate_single_turn = scripted


def _batch(trainer):
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); compute_loss reads it
    inputs = [trainer.train_dataset[i] for i in range(G)]
    return trainer._generate_and_score_completions(inputs)


def _policy_from_logits(trainer, logits_fn, store):
    """Replace TRL's fused log-prob computation by one through explicit logits, so that their gradient is visible."""

    def per_token_logps(model, input_ids, attention_mask, logits_to_keep, *args, compute_entropy=False, **kwargs):
        logits = logits_fn(model, input_ids, attention_mask)[:, -logits_to_keep - 1:-1]
        logits.retain_grad()
        store["logits"] = logits
        logp = torch.log_softmax(logits.float(), dim=-1)
        target = input_ids[:, -logits_to_keep:]
        token_logps = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1) if compute_entropy else None
        return token_logps, entropy, None

    trainer._get_per_token_logps_and_entropies = per_token_logps


def test_batch_tool_mask_rewards_and_group_advantages(tiny_qwen3, tmp_path):
    trainer = _trainer(tiny_qwen3, tmp_path, retrieval_bonus=0.5)
    _script_first_turns(trainer)
    out = _batch(trainer)
    tok = trainer.processing_class
    mask, ids = out["tool_mask"], out["completion_ids"]
    for row in range(G):
        spans = tool_result_spans(mask[row][out["completion_mask"][row].bool()].tolist())
        assert len(spans) == 1  # one tool turn -> one masked span, exactly the tool result
        (a, b), = spans
        masked_text = tok.decode(ids[row, a:b])
        assert "<tool_response>" in masked_text and GOLD in masked_text
        assert "<tool_call>" in tok.decode(ids[row, :a]) and ANSWERS[row] in tok.decode(ids[row, b:])
    # rewards [1,0,0,1] from the answer plus the same retrieval bonus for all: the bonus cancels in the group
    expected = group_advantages([1.5, 0.5, 0.5, 1.5], G, trainer.args.scale_rewards)
    assert torch.allclose(out["advantages"], expected, atol=1e-6)
    assert abs(out["advantages"].sum().item()) < 1e-5
    assert trainer._metrics["train"]["tools/masked_fraction"][-1] > 0


def test_gradient_at_tool_result_positions_is_exactly_zero(tiny_qwen3, tmp_path):
    trainer = _trainer(tiny_qwen3, tmp_path, beta=0.1)  # beta > 0: the KL term is masked too
    _script_first_turns(trainer)
    out = _batch(trainer)
    store = {}
    _policy_from_logits(trainer, lambda m, i, a: m(input_ids=i, attention_mask=a).logits, store)
    loss = trainer.compute_loss(trainer.model, out)
    loss.backward()
    grad = store["logits"].grad  # [B, C, V]: logits predicting completion token j sit at j
    on_tool = (out["tool_mask"] == 0) & out["completion_mask"].bool()
    on_model = (out["tool_mask"] == 1) & out["completion_mask"].bool()
    assert on_tool.sum() > 10 and on_model.sum() > 10
    assert torch.count_nonzero(grad[on_tool]) == 0
    assert grad[on_model].abs().sum() > 0


def test_loss_unchanged_when_retrieved_text_is_replaced(tiny_qwen3, tmp_path):
    trainer = _trainer(tiny_qwen3, tmp_path, beta=0.1)
    _script_first_turns(trainer)
    out = _batch(trainer)
    vocab = trainer.model.config.vocab_size
    theta = torch.nn.Parameter(torch.randn(vocab, generator=torch.Generator().manual_seed(0)))
    # A context-free policy: its log-probabilities on the model's tokens cannot depend on the retrieved text.
    _policy_from_logits(trainer, lambda m, i, a: theta.expand(*i.shape, vocab), {})
    on_tool = (out["tool_mask"] == 0) & out["completion_mask"].bool()

    def loss_and_grad(batch):
        theta.grad = None
        loss = trainer.compute_loss(trainer.model, batch)
        loss.backward()
        return loss.detach(), theta.grad.clone()

    swapped = dict(out)
    gen = torch.Generator().manual_seed(1)
    swapped["completion_ids"] = out["completion_ids"].masked_scatter(
        on_tool, torch.randint(0, vocab, (int(on_tool.sum()),), generator=gen))
    swapped["ref_per_token_logps"] = out["ref_per_token_logps"].masked_scatter(
        on_tool, -10 * torch.rand(int(on_tool.sum()), generator=gen))
    assert not torch.equal(swapped["completion_ids"], out["completion_ids"])
    logps = trainer._get_per_token_logps_and_entropies(None, torch.cat([out["prompt_ids"], out["completion_ids"]], 1),
                                                       None, out["completion_ids"].size(1))[0]
    logps_swapped = trainer._get_per_token_logps_and_entropies(
        None, torch.cat([out["prompt_ids"], swapped["completion_ids"]], 1), None, out["completion_ids"].size(1))[0]
    assert torch.equal(logps[~on_tool], logps_swapped[~on_tool])  # same log-probs on the model's tokens
    loss, grad = loss_and_grad(out)
    loss_swapped, grad_swapped = loss_and_grad(swapped)
    assert torch.equal(loss, loss_swapped) and torch.equal(grad, grad_swapped)
    # the control: unmasking the tool tokens makes the loss depend on them
    unmasked = {**swapped, "tool_mask": torch.ones_like(out["tool_mask"])}
    assert not torch.equal(loss_and_grad(unmasked)[0], loss_and_grad({**out, "tool_mask": unmasked["tool_mask"]})[0])


def test_two_grpo_steps_on_cpu_with_the_search_tool(tiny_qwen3, tmp_path):
    trainer = _trainer(tiny_qwen3, tmp_path, max_steps=2)
    _script_first_turns(trainer)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2
    assert all(h["tools/call_frequency"] == 1.0 and h["tools/masked_fraction"] > 0 for h in logs)
    assert all(math.isclose(h["reward"], 0.5) for h in logs)
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())


def test_trainer_rejects_plain_grpo_config(tiny_qwen3, tmp_path):
    from trl import GRPOConfig

    with pytest.raises(TypeError, match="RGRPOConfig"):
        RGRPOTrainer(model=str(tiny_qwen3), args=GRPOConfig(output_dir=str(tmp_path), use_cpu=True), tools=[search])
