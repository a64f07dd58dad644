"""A float64 model computes in float64 throughout: RMSNorm and RoPE without a float32 round trip.

Why: transformers' ``LlamaRMSNorm`` casts its input to float32 and ``LlamaRotaryEmbedding``
computes cos/sin in float32, whatever the model's dtype. A float64 model (the tiny pair of the
exactness tests) then carries float32 rounding: the mean of squares in each norm is a float32
reduction whose summation order depends on the tensor's shape and on how the machine splits the
work, so two forwards of the same tokens in different shapes (a tree forward and a full
re-forward) can differ by an ulp of float32 in a normalised hidden state. One such ulp per element
moves the tiny model's logits by up to ~2e-5 and its probabilities by ~7e-7, far above the 1e-10
that the float64 tests compare at (``tests/core/test_lm_grow.py`` failed so on a loaded machine).

``exact_float64`` swaps the classes of a model's ``LlamaRMSNorm`` and ``LlamaRotaryEmbedding``
modules (same parameters and buffers, same ``state_dict``) for subclasses that compute float64
inputs in float64 and leave every other dtype to transformers' code unchanged, so float32 and
bfloat16 models (every benchmark) compute exactly as before.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding


class ExactRMSNorm(LlamaRMSNorm):
    """``LlamaRMSNorm`` that keeps a float64 input in float64."""

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:  # [..., H]
        if hidden_states.dtype != torch.float64:
            return super().forward(hidden_states)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)  # [..., 1]
        return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


class ExactRotary(LlamaRotaryEmbedding):
    """``LlamaRotaryEmbedding`` (default RoPE) computing cos/sin in float64 for a float64 ``x``."""

    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:  # position_ids: [B, S]
        if x.dtype != torch.float64 or self.rope_type != "default":
            return super().forward(x, position_ids)
        inv_freq = self.inv_freq.to(device=x.device, dtype=torch.float64)  # [D/2]
        freqs = position_ids[..., None].to(torch.float64) * inv_freq  # [B, S, D/2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [B, S, D]
        return emb.cos() * self.attention_scaling, emb.sin() * self.attention_scaling


SWAPS = {LlamaRMSNorm: ExactRMSNorm, LlamaRotaryEmbedding: ExactRotary}


def exact_float64(model: nn.Module) -> int:
    """Swap ``model``'s RMSNorm and rotary modules for the exact ones in place; returns how many
    (modules of other classes, subclasses included, are left as they are)."""
    swapped = 0
    for module in model.modules():
        new_cls = SWAPS.get(type(module))
        if new_cls is not None:
            module.__class__ = new_cls
            swapped += 1
    return swapped
