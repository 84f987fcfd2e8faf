"""The in-process chat backend: a transformers causal LM generating through its chat template."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from icml26.errors import InputTypeError, described, input_error
from icml26.validation import check_int

from .backends_base import AssistantMessage, Usage, check_messages, check_sampling, to_template_messages
from .toolcalls import parse_tool_calls

__all__ = ["TransformersChatBackend"]


class TransformersChatBackend:
    """Generate in-process with a transformers causal LM and its chat template.

    ``model_or_path``: a model id/path (loaded with ``AutoModelForCausalLM``) or a loaded model, in
    which case ``tokenizer`` is required. Sampling: ``temperature`` (0 = greedy, the default),
    ``top_p``, ``max_tokens``/``max_new_tokens``, ``seed``, ``stop`` (strings).
    """

    def __init__(self, model_or_path, tokenizer=None, *, device=None, max_new_tokens: int = 256,
                 **default_sampling):
        # the arguments first: loading a model takes long, and a typo found after it wastes that time
        max_new_tokens = check_int("TransformersChatBackend", "max_new_tokens", max_new_tokens, low=1)
        check_sampling("TransformersChatBackend", default_sampling)
        if device is not None and not (isinstance(device, str) or type(device).__name__ == "device"):
            raise InputTypeError("TransformersChatBackend", "device", "None, a device string ('cpu', 'cuda:0') or a "
                                 "torch.device", described(type(device).__name__))
        if isinstance(model_or_path, (str, Path)) and not str(model_or_path).strip():
            raise input_error("TransformersChatBackend", "model_or_path", "a model id or folder, or a loaded model",
                              model_or_path)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if device is not None:
            try:
                torch.device(device)
            except (RuntimeError, TypeError):
                raise input_error("TransformersChatBackend", "device", "a torch device such as 'cpu' or 'cuda:0'",
                                  device) from None
            if str(device).startswith("cuda") and not torch.cuda.is_available():
                raise input_error("TransformersChatBackend", "device", "'cpu' on a machine without a CUDA GPU", device)
        if isinstance(model_or_path, (str, Path)):
            path = str(model_or_path)
            self.model = AutoModelForCausalLM.from_pretrained(path)
            self.tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
            self.name = path
        else:
            if tokenizer is None:
                raise input_error("TransformersChatBackend", "tokenizer", "a tokenizer with a loaded model", None)
            self.model, self.tokenizer = model_or_path, tokenizer
            self.name = getattr(getattr(model_or_path, "config", None), "name_or_path", type(model_or_path).__name__)
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise input_error("TransformersChatBackend", "tokenizer", "a tokenizer with a chat template (set "
                              "tokenizer.chat_template)", described(f"the tokenizer of {self.name!r}, without one"))
        if device is not None:
            self.model.to(torch.device(device))
        self.model.eval()
        self.max_new_tokens = int(max_new_tokens)
        self.default_sampling = dict(default_sampling)
        self._turn = 0

    def __repr__(self) -> str:
        return f"TransformersChatBackend({self.name!r})"

    def chat(self, messages: list[dict], tools: list[dict] | None = None, **sampling) -> AssistantMessage:
        import torch

        check_messages("TransformersChatBackend.chat", messages, tools)
        params = {**self.default_sampling, **check_sampling("TransformersChatBackend.chat", sampling)}
        max_new = int(params.pop("max_tokens", params.pop("max_new_tokens", self.max_new_tokens)))
        temperature = float(params.pop("temperature", 0.0) or 0.0)
        top_p = params.pop("top_p", None)
        seed = params.pop("seed", None)
        stop = params.pop("stop", None)
        if params:
            raise input_error("TransformersChatBackend.chat", "sampling", "temperature, top_p, max_tokens, "
                              "max_new_tokens, seed or stop", described(f"unsupported sampling arguments {sorted(params)}"))
        inputs = self.tokenizer.apply_chat_template(to_template_messages(messages), tools=tools or None,
                                                    add_generation_prompt=True, return_tensors="pt",
                                                    return_dict=True)
        device = next(self.model.parameters()).device
        inputs = {k: v.to(device) for k, v in inputs.items()}
        generate_kwargs: dict[str, Any] = dict(max_new_tokens=max_new, do_sample=temperature > 0,
                                               pad_token_id=self.tokenizer.pad_token_id)
        if temperature > 0:
            generate_kwargs["temperature"] = temperature
            if top_p is not None:
                generate_kwargs["top_p"] = float(top_p)
        if stop:
            generate_kwargs["stop_strings"] = [stop] if isinstance(stop, str) else list(stop)
            generate_kwargs["tokenizer"] = self.tokenizer
        # A seeded call draws from torch's global generator as ``generate`` does, inside a fork: the caller's RNG
        # state is left as it was (the sampled tokens are those of ``torch.manual_seed(seed)`` before generating).
        seeded = torch.random.fork_rng(devices=range(torch.cuda.device_count())) if seed is not None \
            else contextlib.nullcontext()
        with seeded, torch.no_grad():
            if seed is not None:
                torch.manual_seed(int(seed))
            output = self.model.generate(**inputs, **generate_kwargs)
        prompt_len = inputs["input_ids"].shape[1]
        new_ids = output[0, prompt_len:].tolist()
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
        finish = "length"
        for i, token in enumerate(new_ids):
            if token in eos_ids:
                new_ids, finish = new_ids[: i + 1], "stop"
                break
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        self._turn += 1
        content, calls = parse_tool_calls(text, id_prefix=f"call_{self._turn}_")
        if calls and finish == "stop":
            finish = "tool_calls"
        return AssistantMessage(content, calls, Usage(prompt_len, len(new_ids)), finish)
