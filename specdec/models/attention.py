"""CPU attention for cached decoding: SDPA over the key/value heads themselves (grouped queries).

Why: transformers' ``sdpa`` attention copies every key/value head ``num_key_value_groups`` times
(``repeat_kv``) whenever it is given a mask, because the fused CUDA kernels cannot combine a mask
with grouped-query attention. In speculative decoding that is every verify forward of ≥ 2 new
tokens (a causal mask over the cache) and every tree forward (an ancestor mask). Torch's CPU flash
kernel accepts a mask together with ``enable_gqa=True``, so on CPU the copies are pure overhead:
for SmolLM2-135M (9 query heads, 3 key/value heads) they rewrite the whole cache of every layer on
each verify forward.

``specdec_sdpa`` is registered through transformers' public ``AttentionInterface`` and
``AttentionMaskInterface`` (no patched model files); it builds the same masks as ``sdpa`` and
falls back to transformers' own ``sdpa_attention_forward`` off the CPU and for features it does not
handle (dropout in training, position biases, paged caches, soft-capping).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

NAME = "specdec_sdpa"
_FALLBACK_KEYS = ("position_bias", "cache", "softcap")


def cpu_gqa_sdpa(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """``sdpa_attention_forward`` without ``repeat_kv`` on CPU.

    Args:
        query: ``[B, H, Q, D]``; key, value: ``[B, H_kv, K, D]`` (``H`` a multiple of ``H_kv``).
        attention_mask: ``[B, 1, Q, K]`` boolean or additive mask, or ``None``.

    Returns:
        ``([B, Q, H, D] attention output, None)`` like every transformers attention function.
    """
    q_len, kv_len = query.shape[2], key.shape[2]
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    causal = bool(q_len > 1 and attention_mask is None and causal)
    if (
        query.device.type != "cpu"
        or dropout > 0
        or (causal and kv_len != q_len)
        or any(kwargs.get(k) is not None for k in _FALLBACK_KEYS)
    ):
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        is_causal=causal,
        scale=scaling,
        enable_gqa=query.shape[1] != key.shape[1],
    )  # [B, H, Q, D]
    return out.transpose(1, 2).contiguous(), None


def register() -> str:
    """Register ``specdec_sdpa`` (idempotent) and return its name."""
    AttentionInterface.register(NAME, cpu_gqa_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    return NAME


def use_cpu_attention(model: nn.Module | None) -> bool:
    """Switch a model that runs transformers' ``sdpa`` to ``specdec_sdpa``; returns whether it did.

    Models on another attention implementation (eager, flash, flex) are left as they are.
    """
    if model is None or getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    model.set_attn_implementation(register())
    return True
