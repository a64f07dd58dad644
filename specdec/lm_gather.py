"""The tree gather of ``CachedLM.keep``: kept pending nodes copied into place in every layer.

Works in place on ``DynamicCache`` and ``StaticCache`` layers alike (a static cache keeps its
tensors' addresses, which a captured CUDA graph relies on).
"""

from __future__ import annotations

import torch
from transformers import Cache


def gather_nodes(cache: Cache, device: torch.device, prefix: int, nodes: list[int]) -> None:
    """Copy the cache rows of pending ``nodes`` (indices after ``prefix`` cached tokens) to
    ``prefix, prefix + 1, ...`` along the sequence axis of every layer's keys and values."""
    index = {device: torch.tensor([prefix + i for i in nodes], device=device)}  # [K]
    for layer in cache.layers:  # a device_map target's layers live on several devices
        if (at := index.get(layer.keys.device)) is None:
            at = index[layer.keys.device] = index[device].to(layer.keys.device)
        layer.keys[..., prefix : prefix + len(nodes), :] = layer.keys[..., at, :]
        layer.values[..., prefix : prefix + len(nodes), :] = layer.values[..., at, :]
