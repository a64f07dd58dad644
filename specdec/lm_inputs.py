"""The model inputs of new cache nodes: token ids or embeddings, positions, a tree's mask.

``CachedLM`` (``specdec.lm``) appends nodes after a committed prefix of ``prefix`` tokens and
``before`` pending nodes; ``parents`` (over every pending node, old and new; ``-1`` = the prefix)
say which pending node each new one follows. A chain runs the model's causal path with explicit
positions; a tree gets an additive 4-D attention mask (prefix fully visible plus the ancestor
matrix of the pending nodes, ``trees.ancestor_mask``) and positions ``prefix + depth``. Nothing
here touches the KV cache.
"""

from __future__ import annotations

import torch

from specdec.trees import ancestor_mask, depths, is_chain
from specdec.vocab import fit_ids


def node_inputs(
    tokens: torch.Tensor, embeds: torch.Tensor | None, device: torch.device, input_rows: int | None
) -> dict:
    """``input_ids [1, N]`` of ``tokens [N]`` (fitted to a draft's ``input_rows``), or
    ``inputs_embeds [1, N, H]`` when ``embeds [N, H]`` is given."""
    n = int(tokens.shape[0])
    assert embeds is None or embeds.shape[0] == n, (embeds.shape, n)
    if embeds is not None:
        return {"inputs_embeds": embeds.to(device)[None]}  # [1, N, H]
    return {"input_ids": fit_ids(tokens.to(device), input_rows).view(1, n)}  # [1, N]


def position_inputs(
    parents: list[int], prefix: int, before: int, device: torch.device, dtype: torch.dtype
) -> dict:
    """Positions (and, for a tree, the additive mask) of the new nodes ``parents[before:]``."""
    if is_chain(parents):
        first, n = prefix + before, len(parents) - before
        return {"position_ids": torch.arange(first, first + n, device=device)[None]}  # [1, N]
    # Rows: the new nodes (pending index >= before); columns: prefix + every pending node.
    allowed = ancestor_mask(parents)[before:]  # [N, before + N]
    n = int(allowed.shape[0])
    mask = torch.zeros(1, 1, n, prefix + len(parents), dtype=dtype, device=device)
    blocked = ~allowed.to(device)  # [N, before + N]
    mask[0, 0, :, prefix:].masked_fill_(blocked, torch.finfo(dtype).min)  # prefix stays 0
    positions = torch.tensor(depths(parents)[before:], device=device)[None] + prefix  # [1, N]
    return {"attention_mask": mask, "position_ids": positions}
