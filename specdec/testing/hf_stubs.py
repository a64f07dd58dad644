"""Config-only Hugging Face stubs of two families (Llama, Qwen2) for ``model=hf`` tests.

A stub is a tiny seeded random model saved with ``save_pretrained`` beside the tiny pair's
byte-level tokenizer (``specdec.models.tiny.byte_tokenizer``): a folder ``model.target=`` /
``model.draft=`` accept like any downloaded checkpoint, built in well under a second.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from specdec.models.tiny import byte_tokenizer

FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM)}


def save_stub(
    folder: Path, family: str, *, layers: int, seed: int, vocab: int = 259, like: str | None = None
) -> str:
    """A seeded random model of ``family`` with the byte tokenizer, saved to ``folder``; with
    ``like`` (a saved stub) its weights are that model's plus noise (its first layers, its
    embedding rows): a draft that agrees with its target often, not always."""
    config_cls, model_cls = FAMILIES[family]
    config = config_cls(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
        for p in model.parameters():  # peakier conditionals than the default init
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.35)
    if like is not None:
        source = model_cls.from_pretrained(like).state_dict()
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, p in model.state_dict().items():
                if name in source:
                    rows = min(p.shape[0], source[name].shape[0])
                    p[:rows].copy_(source[name][:rows])  # padding rows past them stay random
                    if p.dim() == 2:  # near the target, not equal: some drafts are rejected
                        p.add_(torch.randn(p.shape, generator=gen) * 0.01)
    model.save_pretrained(folder)
    byte_tokenizer().save_pretrained(folder)
    return str(folder)
