"""SpecBlock's cross-block unrolling in training (the public code's
``OnlineSpecBlockModel.forward``).

Block 1 runs at every position of a trace under the cross-position causal mask. For each
transition a cut ``M ~ U{1..K}`` (one per transition for the whole batch) gives the next block:
condition = the previous block's hidden at slot ``M-1``, input tokens shifted by the running
offset ``o += M`` (teacher forcing with the true tokens), attention = block 1's keys at positions
``j < i`` plus the earlier blocks' keys at the same position, each below its cut (the valid-prefix
mask). Gradients flow through those keys (not detached). Slot ``k`` of a block with offset ``o``
at position ``i`` predicts ``x_{i+o+k+2}``. ``learners.specblock.module`` computes the losses.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specdec.nets.specblock.net import BlockOut, SpecBlockNet
from specdec.nets.specblock.slots import (
    AppendKeys,
    ChainKeys,
    cross_visible,
    slot_keys_positions,
)


def unroll(
    net: SpecBlockNet,
    embed: torch.nn.Module,
    ids: torch.Tensor,
    feats: torch.Tensor,
    cuts: Sequence[int],
) -> list[tuple[int, BlockOut]]:
    """``(offset, BlockOut)`` of blocks ``1..len(cuts)+1`` at the ``S = T-1`` positions.

    Args:
        net: the drafter network.
        embed: the target's (frozen) input embedding.
        ids: ``[B, T]`` right-padded traces; feats: ``[B, T, k, H]`` their target features.
        cuts: ``M`` of each transition (``1..K``): block ``b+1`` starts ``cuts[b]`` tokens later.
    """
    b, t = ids.shape
    s, k = t - 1, net.slots
    positions = torch.arange(s, device=ids.device)  # [S]
    embeds = embed(ids)  # [B, T, H]
    first = (positions + 1)[None].expand(b, -1)  # [B, S]
    out = net.block(
        net.condition(feats[:, :s].to(embeds.dtype)), embeds[:, 1:], first, AppendKeys(None, s, k)
    )
    runs, offset = [(0, out)], 0
    cross = [(kk.flatten(2, 3), vv.flatten(2, 3)) for kk, vv in out.kv]  # block 1, [B,h,S*K,d]
    cross_mask = cross_visible(positions.cpu(), slot_keys_positions(s, k))  # [S, S*K]: j < i
    prefix = out.kv
    for j, m in enumerate(cuts):
        # 1. Next condition: slot M-1's hidden; inputs: the true tokens M further on.
        offset += int(m)
        cond = out.hidden[:, :, m - 1]  # [B, S, H]
        tokens = embeds[:, (positions + 1 + offset).clamp(max=t - 1)]  # [B, S, H]
        # 2. The block under block 1's keys (j < i) and the earlier blocks' valid prefixes.
        keys = ChainKeys(cross, cross_mask, prefix, torch.tensor([list(cuts[: j + 1])]), k)
        out = net.block(cond, tokens, first + offset, keys)
        runs.append((offset, out))
        prefix = [
            (torch.cat([pk, kk], 3), torch.cat([pv, vv], 3))
            for (pk, pv), (kk, vv) in zip(prefix, out.kv)
        ]
    return runs
