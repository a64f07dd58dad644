"""EAGLE-3's training-time test: the drafter unrolled on its own outputs, and the attention mask
of each unrolled step.

Step ``j`` feeds, at position ``t``, the draft's step-``j-1`` output ``h_{t-1}`` as the condition
(step 0: the target's fused features ``f_t``) with the true next token; its queries see the step-0
keys at positions ``≤ t-j`` and the step-``i`` key at position ``t-j+i`` for ``i = 1..j``
(``ttt_mask``), as a depth-``j`` node of the decoding tree sees the verified prefix and its drafted
ancestors. ``learners.eagle3.module`` computes the losses on the logits of every step.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from specdec.nets.eagle3.net import Eagle3Net
from specdec.nets.eagle3.published import PublishedEagle3Net


def ttt_mask(length: int, step: int, valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``[B, 1, S, (step+1)·S]`` additive mask of unrolled step ``step`` over the keys of steps
    ``0..step`` (each ``S`` positions): step-0 keys at ``s ≤ t-step``, step-``i`` key at
    ``s = t-step+i``; ``valid [B, S]`` masks padded keys."""
    t = torch.arange(length)[:, None]  # [S, 1]
    s = torch.arange(length)[None, :]  # [1, S]
    blocks = [s <= t - step] + [s == t - step + i for i in range(1, step + 1)]
    allowed = torch.cat(blocks, 1)[None] & valid.repeat(1, step + 1)[:, None, :]  # [B, S, K]
    mask = torch.zeros(allowed.shape, dtype=dtype)
    return mask.masked_fill_(~allowed, torch.finfo(dtype).min)[:, None]


def unroll(
    net: Eagle3Net | PublishedEagle3Net,
    embed: torch.nn.Module,
    ids: torch.Tensor,
    feats: torch.Tensor,
    length: torch.Tensor,
    steps: int,
) -> list[torch.Tensor]:
    """``[B, S, V_d]`` logits of each unrolled step, ``S = T - 1`` draft positions.

    Args:
        net: the drafter network.
        embed: the target's (frozen) input embedding.
        ids: ``[B, T]`` right-padded traces; feats: ``[B, T, k, H]`` their target features.
        length: ``[B]`` real lengths.
        steps: unrolled steps (1 = plain teacher forcing).

    Position ``t`` reads ``f_t`` (step 0) or the previous step's output at ``t-1`` (step ``j``),
    and ``x_{t+1}``; it predicts ``x_{t+2}``.
    """
    b, s = ids.shape[0], ids.shape[1] - 1
    embeds = embed(ids[:, 1:])  # [B, S, H]
    cond = net.condition(feats[:, :s].to(embeds.dtype))  # [B, S, H]
    valid = torch.arange(s, device=ids.device)[None] < (length[:, None] - 1)  # [B, S]
    positions = torch.arange(s, device=ids.device)[None].expand(b, -1)  # [B, S]
    cache, out = DynamicCache(config=net.decoder.config), []
    for j in range(steps):
        # 1. Inputs from the condition, 2. one decoder pass over the step's keys so far,
        # 3. the next step's condition: this step's output shifted by one position.
        mask = ttt_mask(s, j, valid.cpu(), embeds.dtype).to(ids.device)
        logits, h = net.draft_step(
            net.inputs(embeds, cond), attention_mask=mask, position_ids=positions, cache=cache
        )  # [B,S,V_d], [B,S,H]
        out.append(logits)
        cond = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)
    return out
