"""Stub EAGLE-3 heads in the published layouts, with random weights, for tests.

``write_stub`` writes a folder a released head would be: the ``LlamaForCausalLMEagle3`` layout
(SpecForge / SGLang / vLLM: flat Llama config + ``draft_vocab_size`` + the target layers under
vLLM's top-level key, as ``hidden_states`` indices; ``midlayer.*`` tensors) or vLLM
speculators' (``transformer_layer_config`` nested, ``layers.0.*`` tensors), for a target of a
given hidden size and vocabulary, with ``V_d < V`` and ``d2t``/``t2d``. The draft layer's shapes
(``HEADS``, ``KV``: grouped-query attention, ``HEAD_DIM``, ``INTER``) are this module's
constants, independent of the target's.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

LAYERS = [0, 1, 2]
HEADS, KV, HEAD_DIM, INTER, V_D, THETA, EPS = 4, 2, 8, 48, 96, 10000.0, 1e-6


def stub_tensors(hidden: int, vocab: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random float64 tensors of a head in the published layout (``midlayer.*`` names)."""
    gen = torch.Generator().manual_seed(seed)

    def rnd(*shape: int, scale: float = 0.3) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale

    h, q, kv = hidden, HEADS * HEAD_DIM, KV * HEAD_DIM
    draft = torch.sort(torch.randperm(vocab, generator=gen)[:V_D]).values  # [V_d] target ids
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[draft] = True
    return {
        "fc.weight": rnd(h, 3 * h),
        "midlayer.input_layernorm.weight": 1 + rnd(h, scale=0.1),
        "midlayer.hidden_norm.weight": 1 + rnd(h, scale=0.1),
        "midlayer.self_attn.q_proj.weight": rnd(q, 2 * h),
        "midlayer.self_attn.k_proj.weight": rnd(kv, 2 * h),
        "midlayer.self_attn.v_proj.weight": rnd(kv, 2 * h),
        "midlayer.self_attn.o_proj.weight": rnd(h, q),
        "midlayer.post_attention_layernorm.weight": 1 + rnd(h, scale=0.1),
        "midlayer.mlp.gate_proj.weight": rnd(INTER, h),
        "midlayer.mlp.up_proj.weight": rnd(INTER, h),
        "midlayer.mlp.down_proj.weight": rnd(h, INTER),
        "norm.weight": 1 + rnd(h, scale=0.1),
        "lm_head.weight": rnd(V_D, h),
        "d2t": draft - torch.arange(V_D),
        "t2d": t2d,
        "embed_tokens.weight": rnd(vocab, h),  # some heads ship a copy: not read
    }


def stub_config(hidden: int, vocab: int, layers: list[int] | None) -> dict:
    """The ``LlamaForCausalLMEagle3`` ``config.json`` (``layers``: pinned target layers, as
    ``hidden_states`` indices under vLLM's key: ``nets/eagle3/layer_ids.py``)."""
    cfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": INTER,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "head_dim": HEAD_DIM,
        "num_hidden_layers": 1,
        "vocab_size": vocab,
        "draft_vocab_size": V_D,
        "rms_norm_eps": EPS,
        "rope_theta": THETA,
        "max_position_embeddings": 512,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    }
    if layers is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = layers
    return cfg


def write_stub(
    folder: Path,
    hidden: int = 32,
    vocab: int = 259,
    layers: list[int] | None = LAYERS,
    fmt: str = "eagle3_hf",
    seed: int = 0,
    **extra,
) -> Path:
    """A stub head for a target of ``hidden`` / ``vocab`` in ``fmt`` (``eagle3_hf`` or
    ``speculators``: nested config, ``layers.0.*`` names); ``extra``: more config keys (e.g.
    ``norm_before_residual=True``)."""
    folder.mkdir(parents=True, exist_ok=True)
    state, cfg = stub_tensors(hidden, vocab, seed), stub_config(hidden, vocab, layers) | extra
    if fmt == "speculators":
        state = {k.replace("midlayer.", "layers.0."): v for k, v in state.items()}
        layer_cfg = {
            k: v
            for k, v in cfg.items()
            if k not in ("architectures", "eagle_aux_hidden_state_layer_ids", "draft_vocab_size")
        }
        cfg = {
            "architectures": ["Eagle3Speculator"],
            "speculators_model_type": "eagle3",
            "transformer_layer_config": layer_cfg,
            "draft_vocab_size": V_D,
            "norm_before_residual": False,
            "target_hidden_size": None,
            "eagle_aux_hidden_state_layer_ids": layers,
            "speculators_config": {"algorithm": "eagle3", "verifier": {"name_or_path": "x"}},
        }
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder
