"""The R-GRPO toy task (icml26.eval.tasks.optminer): fogged constants, BM25 retrieval, the SFT -> R-GRPO pipeline."""

import random
import statistics

import pytest
import torch

from icml26.eval.tasks.optminer import MODES, ToyRecipe, make_tasks, make_toy_search, make_toy_world, scripted_trajectory, toy_prompt, toy_tokenizer
from icml26.training.optminer import run_toy


@pytest.fixture(scope="module")
def world():
    from icml26.agents.optminer.retrieval import BM25Corpus

    documents, capacities = make_toy_world(0, n_plants=60)
    return documents, capacities, make_toy_search(BM25Corpus(documents), k=1)


def test_constant_is_fogged_out_of_the_question_and_only_in_its_document(world):
    documents, capacities, _ = world
    tasks = make_tasks(capacities, sorted(capacities), random.Random(0), 60)
    for task in tasks:
        assert task.answer == task.capacity * task.shifts
        # the only digits of the question are the plant code's (shifts are words: every question is as long)
        assert not any(c.isdigit() for c in task.question.replace(task.plant, "")), task.question
        holders = [d for d in documents if f"Plant {task.plant} makes {task.capacity} units" in d.text]
        assert [d.id for d in holders] == [task.gold_doc.strip("[]")]
    # the distractor never carries the capacity's number, so reading it can never be rewarded by chance
    staff = {d.id.split("-")[0]: int(d.text.split("employs ")[1].split()[0]) for d in documents if "-staff" in d.id}
    assert staff.keys() == capacities.keys() and all(staff[p] != capacities[p] for p in capacities)


def test_bm25_finds_the_fogged_document_first(world):
    documents, capacities, search = world
    hits = [search(f"capacity of plant {p}").startswith(f"Document 1: [{p}-cap]") for p in capacities]
    assert sum(hits) / len(hits) >= 0.9
    assert make_toy_search(None)("capacity of plant K7") == "No document matched the query."


def test_scripted_trajectory_renders_with_the_toy_tokenizer(world):
    _, capacities, search = world
    tasks = make_tasks(capacities, sorted(capacities), random.Random(0), 20)
    trajectories = [scripted_trajectory(task, search) for task in tasks]
    assert trajectories[0][:2] == toy_prompt(tasks[0])
    tokenizer = toy_tokenizer(trajectories[1:], [search, make_toy_search(None)])
    # a trajectory the vocabulary was not read from still has no unknown word: only its numbers and codes differ
    text = tokenizer.apply_chat_template(trajectories[0], tools=[search], tokenize=False)
    assert "<tool_call>" in text and "<tool_response>" in text and tasks[0].gold_doc in text
    assert text.rstrip().endswith(f"<answer>{int(tasks[0].answer)}</answer><|im_end|>")
    ids = tokenizer(text)["input_ids"]
    assert tokenizer.unk_token_id not in ids and tokenizer.decode(ids) == text
    # the plant code is the same three ids in the question, the search query and the document
    code = tokenizer(tasks[0].plant)["input_ids"]
    assert len(code) == 3 and sum(ids[i:i + 3] == code for i in range(len(ids))) >= 5
    # every prompt is as long, so copying the code is a fixed-offset copy
    lengths = {len(tokenizer.apply_chat_template(t[:3], tools=[search])["input_ids"]) for t in trajectories}
    assert len(lengths) == 1


def test_bad_mode_and_device_are_rejected():
    if not torch.cuda.is_available():  # refused before any work instead of failing late
        with pytest.raises(ValueError, match="run_toy: device: expected 'cpu' on a machine without a CUDA GPU"):
            run_toy(0, device="cuda")
    with pytest.raises(ValueError, match="run_toy: mode: expected one of"):
        run_toy(0, mode="medium")
    assert set(MODES) == {"quick", "full"}


def test_run_toy_end_to_end_tiny_recipe(tmp_path):
    """SFT for a few steps, one real R-GRPO step (transformers generation, the search tool), three evaluations."""
    recipe = ToyRecipe(n_plants=24, n_eval=4, n_sft=8, sft_steps=2, sft_batch=4, grpo_steps=1,
                       grpo_prompts_per_step=1, num_generations=4)
    out = run_toy(0, recipe=recipe, output_dir=str(tmp_path))
    for key in ("reward_sft", "reward_rgrpo", "reward_notool", "reward_sft_notool", "tool_rate_sft",
                "tool_rate_rgrpo", "gold_rate_sft", "gold_rate_rgrpo", "masked_fraction"):
        assert 0.0 <= out[key] <= 1.0, key
    assert len(out["reward_curve"]) == 1 and out["seconds"] > 0


def test_teacher_answers_with_what_it_read(world):
    """The teacher's demonstration is honest about its search: the staff query reads the staff count."""
    documents, capacities, search = world
    task = make_tasks(capacities, sorted(capacities), random.Random(1), 1)[0]
    good = scripted_trajectory(task, search, "capacity of plant {plant}")
    bad = scripted_trajectory(task, search, "staff of plant {plant}")
    assert good[2]["tool_calls"][0]["function"]["arguments"] == {"query": f"capacity of plant {task.plant}"}
    assert task.gold_doc in good[3]["content"] and good[4]["content"] == f"<answer>{int(task.answer)}</answer>"
    staff = next(d for d in documents if d.id == f"{task.plant}-staff")
    workers = int(staff.text.split("employs ")[1].split()[0])
    assert task.gold_doc not in bad[3]["content"] and workers != task.capacity  # staff counts never equal capacities
    assert bad[4]["content"] == f"<answer>{workers * task.shifts}</answer>"
    assert scripted_trajectory(task, make_toy_search(None))[4]["content"] == "<answer>0</answer>"
    with pytest.raises(ValueError, match="teacher_queries"):
        run_toy(0, recipe=ToyRecipe(teacher_queries=(("staff of plant", 1.0),)))


@pytest.mark.slow
def test_toy_claim_over_three_seeds():
    """R-GRPO beats SFT alone by 0.1 and the tool-disabled ablation scores lower (median of 3 seeds)."""
    runs = [run_toy(seed) for seed in (0, 1, 2)]
    gain = statistics.median(r["reward_rgrpo"] - r["reward_sft"] for r in runs)
    gap = statistics.median(r["reward_rgrpo"] - r["reward_notool"] for r in runs)
    assert gain >= 0.1 and gap > 0


def test_compact_template_is_accepted_by_trl_and_renders_like_qwen(world):
    """TRL needs a prefix-preserving template with {% generation %} markers that trains the end-of-turn token;
    tool calls and responses must render as the Qwen template does, so the tokenizer's response parser reads them."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import (has_generation_markers, is_chat_template_prefix_preserving,
                                         is_chat_template_stop_token_trained, parse_response)

    from icml26.eval.tasks.optminer import COMPACT_TOOL_TEMPLATE
    from icml26.tiny import build_tiny_model

    _, capacities, search = world
    task = make_tasks(capacities, sorted(capacities)[:1], random.Random(0), 1)[0]
    messages = scripted_trajectory(task, search)
    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model("qwen3", max_position_embeddings=1024))
    qwen = tokenizer.apply_chat_template(messages, tools=[search], tokenize=False)
    tokenizer.chat_template = COMPACT_TOOL_TEMPLATE
    compact = tokenizer.apply_chat_template(messages, tools=[search], tokenize=False)
    assert is_chat_template_prefix_preserving(tokenizer) and has_generation_markers(tokenizer.chat_template)
    assert is_chat_template_stop_token_trained(tokenizer)
    assert "Tools: search(query)<|im_end|>" in compact and "<tools>" not in compact
    # everything after the system turn is rendered exactly as Qwen's template renders it
    assert compact.split("<|im_end|>\n", 1)[1] == qwen.split("<|im_end|>\n", 1)[1]
    assert len(tokenizer(compact)["input_ids"]) < 0.7 * len(tokenizer(qwen)["input_ids"])
    prompt = tokenizer.apply_chat_template(messages[:2], tools=[search], add_generation_prompt=True, tokenize=False)
    reply = compact[len(prompt):].split("<|im_end|>")[0] + "<|im_end|>"
    parsed = parse_response(tokenizer, tokenizer(reply)["input_ids"], prefix=tokenizer(prompt)["input_ids"],
                            tools=[search])
    assert parsed["tool_calls"][0]["function"]["name"] == "search"


def test_worlds_keep_the_plants_and_redraw_the_numbers():
    docs0, caps0 = make_toy_world(3, n_plants=40)
    docs1, caps1 = make_toy_world(3, n_plants=40, world=1)
    assert set(caps0) == set(caps1) and caps0 == make_toy_world(3, n_plants=40)[1]
    assert sum(caps0[p] != caps1[p] for p in caps0) >= 30  # a demonstration's capacity says nothing of world 0's
    assert [d.id for d in docs0] == [d.id for d in docs1]
    with pytest.raises(ValueError, match="sft_worlds"):
        run_toy(0, recipe=ToyRecipe(sft_worlds=0))
