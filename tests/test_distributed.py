"""Two processes on loopback (gloo, CPU): SERA SFT and an R2G SFT run under ``torchrun`` and ``accelerate launch``.

``distributed_worker.py`` trains both for 2 optimizer steps with a global batch of 4 sequences
(1 x 2 micro-batches x 2 processes for SERA, 2 x 1 x 2 for R2G), and once in a single process with
the same global batch (gradient accumulation 4 and 2). The losses must match, the logged values be
the same on both ranks (reduced, not rank-local), and rank 0 alone must write. No launcher is told
``--cpu`` / ``ACCELERATE_USE_CPU``: the toolkit's configs set ``use_cpu`` for a multi-process launch
on a machine without CUDA.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")

WORKER = str(Path(__file__).with_name("distributed_worker.py"))
# R2G pairs the examples of a micro-batch in a random order drawn per process: its term (and so the
# loss) differs from the single-process run's by ~3e-4 relative; SERA's loss matches to float error.
R2G_RTOL = 2e-3


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _launch(prefix: list[str], model_path: str, out: Path, ga: int) -> list[dict]:
    out.mkdir(parents=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("ACCELERATE_USE_CPU", None)
    done = subprocess.run([*prefix, WORKER, model_path, str(out), str(ga)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return [json.loads(p.read_text()) for p in sorted((out / "ranks").glob("rank*.json"))]


@pytest.fixture(scope="module")
def model_path():
    from icml26.tiny import build_tiny_model

    return str(build_tiny_model("qwen3", max_position_embeddings=1024))


@pytest.fixture(scope="module")
def single(model_path, tmp_path_factory):
    (rank0,) = _launch([sys.executable], model_path, tmp_path_factory.mktemp("single") / "run", ga=4)
    assert rank0["world_size"] == 1
    return rank0


LAUNCHERS = {
    "torchrun": lambda port: [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                              "--master-addr", "127.0.0.1", "--master-port", str(port)],
    "accelerate": lambda port: [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
                                "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                                "--main_process_ip", "127.0.0.1", "--main_process_port", str(port)],
}


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_two_processes_match_one_with_the_same_global_batch_and_rank_0_alone_writes(launcher, single, model_path,
                                                                                   tmp_path):
    out = tmp_path / "run"
    ranks = _launch(LAUNCHERS[launcher](_port()), model_path, out, ga=2)
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world_size"] == 2 and r["parallel_mode"] == "ParallelMode.DISTRIBUTED" for r in ranks)  # real DDP
    # rank 0 alone wrote (SERA's model + sera_train.json, R2G's model); rank 1 called no writer
    assert ranks[0]["writes"] == ["model.save_pretrained", "atomic_write_json", "model.save_pretrained"]
    assert ranks[1]["writes"] == []
    assert sorted(p.name for p in out.iterdir()) == ["r2g", "ranks", "sera", "trajectories.jsonl"]
    assert len(list(out.rglob("model.safetensors"))) == 2 and len(list(out.rglob("sera_train.json"))) == 1
    saved = json.loads((out / "sera" / "sera_train.json").read_text())

    # SERA: the same loss as one process with the same global batch, and the same on both ranks
    for rank in ranks:
        assert rank["sera_train_loss"] == pytest.approx(single["sera_train_loss"], rel=1e-5)
        assert rank["sera_losses"] == pytest.approx(single["sera_losses"], rel=1e-5)
    assert saved["train_loss"] == pytest.approx(ranks[0]["sera_train_loss"], rel=1e-12)
    assert ranks[0]["sera_train_loss"] == ranks[1]["sera_train_loss"]  # reduced, not rank-local

    # R2G: losses within the tolerance, and its r2g/* logs reduced across ranks (identical on both)
    assert len(ranks[0]["r2g_logs"]) == len(single["r2g_logs"]) == 2
    for mine, ref in zip(ranks[0]["r2g_logs"], single["r2g_logs"]):
        assert mine["loss"] == pytest.approx(ref["loss"], rel=R2G_RTOL)
        assert mine["r2g/term"] == pytest.approx(ref["r2g/term"], rel=5 * R2G_RTOL)
    for key in ("loss", "r2g/term", "r2g/distance", "r2g/angular_dist", "r2g/v_norm"):
        assert [e[key] for e in ranks[0]["r2g_logs"]] == [e[key] for e in ranks[1]["r2g_logs"]], key


@pytest.mark.slow
@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_saisa_and_tfmixer_trainers_under_two_processes_match_one_process(launcher, tmp_path):
    """SAISA's two ``Trainer`` stages and TFMixer in a plain ``Trainer``: two processes (batch 2 / 4 per
    device) against one with gradient accumulation 2; about 50 s on 2 cores, so kept out of the default run."""
    def launch(prefix, out, ga):
        out.mkdir(parents=True)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        done = subprocess.run([*prefix, WORKER, "no-model", str(out), str(ga), "saisa"], capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
        return [json.loads(p.read_text()) for p in sorted((out / "ranks").glob("rank*.json"))]

    (one,) = launch([sys.executable], tmp_path / "single", 2)
    ranks = launch(LAUNCHERS[launcher](_port()), tmp_path / "ddp", 1)
    assert one["world_size"] == 1 and [r["world_size"] for r in ranks] == [2, 2]
    for rank in ranks:
        for stage in ("stage1", "stage2"):
            assert len(rank["saisa"][stage]) == 2
            assert rank["saisa"][stage] == pytest.approx(one["saisa"][stage], rel=1e-5)
        assert rank["tfmixer"] == pytest.approx(one["tfmixer"], rel=1e-5)


@pytest.mark.parametrize("launcher", ["torchrun", pytest.param("accelerate", marks=pytest.mark.slow)])
def test_rgrpo_under_two_processes_trains_one_model(launcher, model_path, tmp_path):
    """R-GRPO's trainer (TRL's GRPO with a tool) in two processes on CPU: real DDP (the replicas end
    equal and differ from the start), both ranks see the scripted group rewards, and rank 0 alone saves
    the model. ``accelerate launch`` only in the slow run (30 s more)."""
    out = tmp_path / "run"
    out.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("ACCELERATE_USE_CPU", None)
    done = subprocess.run([*LAUNCHERS[launcher](_port()), WORKER, model_path, str(out), "1", "rgrpo"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    ranks = [json.loads(p.read_text()) for p in sorted((out / "ranks").glob("rank*.json"))]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["world_size"] == 2 and r["parallel_mode"] == "ParallelMode.DISTRIBUTED" for r in ranks)
    assert ranks[0]["writes"] == ["model.save_pretrained"] and ranks[1]["writes"] == []
    assert len(list(out.rglob("model.safetensors"))) == 1
    assert ranks[0]["checksum"] == ranks[1]["checksum"]  # one model, kept in sync by DDP
    assert ranks[0]["checksum"] != ranks[0]["checksum_before"]  # and it trained
    for rank in ranks:
        assert len(rank["logs"]) == 2
        assert all(abs(e["reward"] - 0.5) < 1e-6 and e["tools/call_frequency"] == 1.0 for e in rank["logs"])


def test_finish_processes_destroys_the_group_and_is_a_no_op_without_one(monkeypatch):
    import torch.distributed as dist

    from icml26.training.distributed import finish_processes

    finish_processes()  # no group: nothing to do
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    assert dist.is_initialized()
    finish_processes()
    assert not dist.is_initialized()
