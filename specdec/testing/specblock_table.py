"""A seeded random SpecBlock network shaped for a ``TableLM`` target (hidden size = vocabulary),
saved as a shipped folder, for the exact tests of the SpecBlock drafters (plain and bandit)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import LlamaConfig

from specdec.nets.specblock.net import SpecBlockNet
from specdec.nets.specblock.store import save_specblock


def save_table_specblock(folder: Path, vocab: int) -> str:
    """Write the network to ``folder`` (float64) and return the folder as ``drafter.path``.

    Head and rank head are scaled up: peaked draft distributions give varied block widths and
    real acceptances."""
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=vocab,
        intermediate_size=24,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=10,
        max_position_embeddings=64,
    )
    cfg.draft_vocab_size = vocab
    torch.manual_seed(0)
    net = SpecBlockNet(cfg, (0,), slots=3, rank_hidden=8).double()
    with torch.no_grad():
        net.head.weight.mul_(40)
        net.rank_head[2].weight.mul_(30)
    save_specblock(net, folder, dtype=torch.float64)
    return str(folder)
