"""Trains SERA SFT (``icml26 sera train``'s ``main_train``) and an R2G SFT run, launched by ``test_distributed.py``.

``python distributed_worker.py MODEL OUT GA [saisa]`` runs in one process, or under ``torchrun`` /
``accelerate launch`` in several; the global batch is ``1 x GA x processes`` for SERA and
``2 x GA x processes`` for R2G. Each process writes ``OUT/ranks/rank<R>.json``: what it returned
and which writers of models / JSON it called (a spy that calls through), so the test can check
that rank 0 alone wrote. With ``saisa`` it trains SAISA (``train_saisa``) and TFMixer (``Trainer``)
instead (:func:`saisa_and_tfmixer`), with ``rgrpo`` R-GRPO (:func:`rgrpo`).
"""

import argparse
import json
import os
import sys
from pathlib import Path


def main(model_path: str, out: Path, ga: int) -> None:
    import torch
    import transformers
    from datasets import Dataset

    import icml26.utils
    from icml26.training.distributed import launched_world_size
    from icml26.training.r2g import R2GSFTConfig, R2GSFTTrainer
    from icml26.agents.sera.cli import main_train

    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", "0"))
    writes: list[str] = []

    def spy(name, function):
        def wrapper(*args, **kwargs):
            writes.append(name)
            return function(*args, **kwargs)
        return wrapper

    icml26.utils.atomic_write_json = spy("atomic_write_json", icml26.utils.atomic_write_json)
    transformers.PreTrainedModel.save_pretrained = spy("model.save_pretrained",
                                                       transformers.PreTrainedModel.save_pretrained)

    sys.path.insert(0, str(Path(__file__).parent))
    from test_sera_sft import trajectory  # the SFT tests' trajectory rows

    data = out / "trajectories.jsonl"
    if rank == 0 and not data.exists():
        data.write_text("".join(json.dumps(trajectory(n)) + "\n" for n in range(8)))
    if launched_world_size() > 1:
        torch.distributed.init_process_group("gloo")  # only to wait for rank 0's file
        torch.distributed.barrier()
    sera = main_train(["--data", str(data), "--model", model_path, "--out", str(out / "sera"), "--learning_rate", "3e-3",
                       "--max_length", "1024", "--max_steps", "2", "--per_device_train_batch_size", "1",
                       "--gradient_accumulation_steps", str(ga)])

    model = transformers.AutoModelForCausalLM.from_pretrained(model_path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_path)
    texts = [f"item {i} costs {3 * i + 1} coins and weighs {i % 5} kilograms" for i in range(16)]
    config = R2GSFTConfig(output_dir=str(out / "r2g"), max_steps=2, per_device_train_batch_size=2,
                          gradient_accumulation_steps=ga, learning_rate=3e-3, logging_steps=1, save_strategy="no",
                          report_to=[], disable_tqdm=True, seed=0, r2g_alpha=0.05, dataloader_num_workers=0,
                          max_length=64, bf16=False)  # no use_cpu: a 2-process launch sets it
    trainer = R2GSFTTrainer(model=model, args=config, train_dataset=Dataset.from_dict({"text": texts}),
                            processing_class=tokenizer)
    trainer.train()
    trainer.save_model(str(out / "r2g"))
    result = {"rank": rank, "world_size": trainer.args.world_size, "parallel_mode": str(trainer.args.parallel_mode),
              "writes": writes, "sera_train_loss": sera["train_loss"],
              "sera_losses": [e["loss"] for e in sera["log_history"] if "loss" in e],
              "r2g_logs": [e for e in trainer.state.log_history if "loss" in e]}
    (out / "ranks").mkdir(exist_ok=True)
    (out / "ranks" / f"rank{rank}.json").write_text(json.dumps(result))


def saisa_and_tfmixer(out: Path, ga: int) -> None:
    """SAISA's two stages (``train_saisa``) and TFMixer through a plain ``Trainer``, 2 steps each;
    per-device batches of 2 (SAISA) and 4 (TFMixer)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    from icml26.eval.tasks.saisa import load_digits_vqa
    from icml26.eval.tasks.tfmixer import SyntheticIMTSConfig, make_synthetic_imts
    from icml26.models.tfmixer import IMTSCollator
    from icml26.models.saisa import SaisaForConditionalGeneration
    from icml26.models.tfmixer import LABEL_NAMES, TFMixerConfig, TFMixerForForecasting
    from icml26.training.saisa import SaisaDataCollator, SaisaTrainingConfig, train_saisa

    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", "0"))
    data = load_digits_vqa(n_text=50)
    tok = data.tokenizer
    torch.manual_seed(0)
    llm = LlamaForCausalLM(LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, vocab_size=len(tok), max_position_embeddings=64,
                                       pad_token_id=0))
    model = SaisaForConditionalGeneration.from_text_model(llm)
    collator = SaisaDataCollator(tok, model.config.image_token_id, model.n_visual)
    config = SaisaTrainingConfig(stage0_steps=0, stage1_steps=2, stage2_steps=2, batch_size=2,
                                 gradient_accumulation_steps=ga, logging_steps=1, disable_tqdm=True)
    _, logs = train_saisa(model, data.captions.select(range(32)), data.train.select(range(32)), collator, config,
                          str(out / "saisa"))

    splits = make_synthetic_imts((32, 8, 8), SyntheticIMTSConfig(num_channels=3, frequencies=(2.3,)), seed=0)
    torch.manual_seed(0)
    tfmixer = TFMixerForForecasting(TFMixerConfig(num_channels=3, d_model=16))
    args = TrainingArguments(output_dir=str(out / "tfmixer"), max_steps=2, per_device_train_batch_size=4,
                             gradient_accumulation_steps=ga, learning_rate=3e-3, logging_steps=1, save_strategy="no",
                             report_to=[], use_cpu=True, disable_tqdm=True, label_names=LABEL_NAMES, seed=0)
    trainer = Trainer(model=tfmixer, args=args, train_dataset=splits.train, data_collator=IMTSCollator())
    trainer.train()
    result = {"rank": rank, "world_size": trainer.args.world_size,
              "saisa": {stage: [e["loss"] for e in logs[stage] if "loss" in e] for stage in ("stage1", "stage2")},
              "tfmixer": [e["loss"] for e in trainer.state.log_history if "loss" in e]}
    (out / "ranks").mkdir(exist_ok=True)
    (out / "ranks" / f"rank{rank}.json").write_text(json.dumps(result))


def rgrpo(model_path: str, out: Path) -> None:
    """R-GRPO (``RGRPOTrainer``, TRL's GRPO with the search tool) for 2 steps, the policy's turns scripted
    as in ``test_rgrpo.py`` (rewards [1, 0, 0, 1] per group of 4); each process writes its logs and a
    checksum of its weights after training (DDP keeps the replicas equal)."""
    import torch
    import transformers

    rank = int(os.environ.get("RANK", "0"))
    torch.set_num_threads(1)
    writes: list[str] = []
    save = transformers.PreTrainedModel.save_pretrained

    def spy(self, *args, **kwargs):
        writes.append("model.save_pretrained")
        return save(self, *args, **kwargs)

    transformers.PreTrainedModel.save_pretrained = spy
    sys.path.insert(0, str(Path(__file__).parent))
    from test_rgrpo import _script_first_turns, _trainer  # the R-GRPO tests' trainer and scripted turns

    trainer = _trainer(model_path, out / "rgrpo", max_steps=2)
    _script_first_turns(trainer)

    def checksum():
        weights = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
        return [float(weights.sum()), float(weights.abs().sum())]

    before = checksum()
    trainer.train()
    trainer.save_model(str(out / "rgrpo"))
    result = {"rank": rank, "world_size": trainer.args.world_size, "parallel_mode": str(trainer.args.parallel_mode),
              "writes": writes, "logs": [e for e in trainer.state.log_history if "reward" in e],
              "checksum_before": before, "checksum": checksum()}
    (out / "ranks").mkdir(exist_ok=True)
    (out / "ranks" / f"rank{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    from icml26.training.distributed import finish_processes

    if sys.argv[4:] == ["saisa"]:
        saisa_and_tfmixer(Path(sys.argv[2]), int(sys.argv[3]))
    elif sys.argv[4:] == ["rgrpo"]:
        rgrpo(sys.argv[1], Path(sys.argv[2]))
    else:
        main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))
    finish_processes()  # no process exits while its gloo group is alive
