"""Target features computed in the training step (``datamodule.features=online``).

The data stage's feature cache (``data.cache_features``: fp16 ``[n, k, H]`` per trace) costs one
target forward per trace once, then disk: 2.4 GB for SmolLM2's 3,630 traces, more than a short
GPU window can carry. Online, each training step runs the frozen target itself (eval mode, no
gradient, its own dtype, moved once to the batch's device) on the batch's right-padded trace
tokens and keeps the ``target_layers`` hidden states, cast through ``cast`` (fp16, as the cache
stores them) so a step reads the numbers a cached run reads: the same values up to fp16 rounding
of the few entries whose fp32 value the other padding width moved across a rounding boundary
(``tests/data/test_online_features.py``). On a GPU the forward is cheap next to the drafter's step.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


@torch.no_grad()
def target_features(
    target: torch.nn.Module,
    ids: torch.Tensor,
    length: torch.Tensor,
    layers: Sequence[int],
    cast: torch.dtype | None = torch.float16,
) -> torch.Tensor:
    """``[B, T, k, H]`` hidden states of ``layers`` at every token of right-padded ``ids``.

    Args:
        target: the frozen target (a CausalLM or its decoder); moved to ``ids``' device once.
        ids: ``[B, T]`` right-padded traces; length: ``[B]`` real lengths.
        layers: indices into ``hidden_states`` (0: the embeddings).
        cast: round through this dtype (the cache's fp16); None: the target's dtype.

    Padded positions hold zeros, as the cache's collated batches do. ``no_grad``, not
    ``inference_mode``: the drafter's autograd saves these features for its backward.
    """
    if next(target.parameters()).device != ids.device:
        target.to(ids.device)
    target.eval()
    decoder = target.get_decoder() if hasattr(target, "get_decoder") else target
    valid = torch.arange(ids.shape[1], device=ids.device)[None] < length.to(ids.device)[:, None]
    states = decoder(
        input_ids=ids, attention_mask=valid.long(), output_hidden_states=True, use_cache=False
    ).hidden_states
    feats = torch.stack([states[i] for i in layers], 2)  # [B, T, k, H]
    if cast is not None:
        feats = feats.to(cast)
    return feats * valid[:, :, None, None]


def batch_features(
    batch: dict[str, torch.Tensor], target: torch.nn.Module, layers: Sequence[int]
) -> torch.Tensor:
    """``batch["feats"]`` when the datamodule read the cache, else ``target_features``."""
    if "feats" in batch:
        return batch["feats"]
    return target_features(target, batch["ids"], batch["length"], layers)
