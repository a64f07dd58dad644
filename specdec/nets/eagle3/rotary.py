"""RoPE frequencies that stay float32 when the EAGLE-3 nets are cast to bfloat16 / float16.

transformers computes ``LlamaRotaryEmbedding``'s ``inv_freq`` in float32 and its cos/sin in
float32, but ``module.to(torch.bfloat16)`` (a loader's cast, ``Placement.place``) casts the
buffer too: a bfloat16 ``inv_freq`` is off by up to 2^-9 relatively, so the rotary phase
``t · inv_freq`` drifts by ~1.8 rad by position 4096 and the drafter attends with rotations the
head was never trained with. ``keep_rotary_float32`` swaps each rotary module's class for a
subclass whose casts to bfloat16 / float16 leave ``inv_freq`` / ``original_inv_freq`` at float32
(moved to the new device; a widening cast is left alone); parameters, ``state_dict`` and forward
are unchanged (the buffers are not persistent).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

BUFFERS = ("inv_freq", "original_inv_freq")
NARROW = (torch.bfloat16, torch.float16)
_CLASSES: dict[type, type] = {}


class Float32Frequencies(nn.Module):
    """Mixin: ``_apply`` (every ``.to`` / ``.half`` / ``.cuda``) never narrows ``BUFFERS``."""

    def _apply(self, fn: Callable, recurse: bool = True):
        kept = {n: b for n, b in self._buffers.items() if n in BUFFERS and b is not None}
        out = super()._apply(fn, recurse)
        for name, before in kept.items():
            after = self._buffers[name]
            if after is not None and after.dtype in NARROW:
                # the values before the cast, at float32 (from float64: float32's rounding)
                self._buffers[name] = before.to(device=after.device, dtype=torch.float32)
        return out


def _float32_class(cls: type) -> type:
    if issubclass(cls, Float32Frequencies):
        return cls
    if cls not in _CLASSES:
        _CLASSES[cls] = type(f"Float32{cls.__name__}", (Float32Frequencies, cls), {})
    return _CLASSES[cls]


def keep_rotary_float32(model: nn.Module) -> int:
    """Make ``model``'s rotary modules (``LlamaRotaryEmbedding`` and subclasses) keep float32
    frequencies through casts, recomputing any already narrowed; returns how many."""
    count = 0
    for module in model.modules():
        if not isinstance(module, LlamaRotaryEmbedding):
            continue
        module.__class__ = _float32_class(type(module))
        for name in BUFFERS:
            buf = module._buffers.get(name)
            if buf is not None and buf.dtype in NARROW:
                module._buffers[name] = _frequencies(module).to(buf.device)
        count += 1
    return count


def _frequencies(module: LlamaRotaryEmbedding) -> torch.Tensor:
    """``[D/2]`` float32 ``inv_freq`` recomputed from the module's config."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    init = (
        module.compute_default_rope_parameters
        if module.rope_type == "default"
        else ROPE_INIT_FUNCTIONS[module.rope_type]
    )
    return init(module.config)[0].float()
