"""SpecBlock's slot geometry: who attends to whom, the attention itself, and the rank head's inputs.

SpecBlock ("Block-Iterative Speculative Decoding with Dynamic Tree Drafting"; public code
github.com/shiweijiezero/SpecBlock) drafts ``K`` *slots* per position:
slot ``k`` of position ``i`` predicts ``x_{i+k+2}``. Keys come in two groups per query:

* **cross** keys: a flat sequence of earlier positions' slots (``[C]`` keys, each tagged with its
  position). Block 1 ("cross-position causal"): query ``(i, k)`` sees *all* ``K`` slots of every
  position ``j < i``. Later blocks see block 1's keys at ``j < i`` only.
* **local** keys: slots at the query's own position. Block 1: slots ``0..k`` of its own block.
  Block ``b >= 2`` ("valid-prefix mask"): first the slots of the earlier blocks at the same
  position, each block ``m`` restricted to its slots ``< M_m`` (the cut that started the next
  block), then slots ``0..k`` of its own block.

``slot_attention`` is a plain softmax over both groups at once (one normaliser), grouped-query
heads included, so training (dense masks over a whole trace) and decoding (a cache of verified
positions) run the same arithmetic.

Rank head inputs: 15 features of the top-20 draft logits (their log-sum-exp stands in for
the full one): the top-10 log-probs, the logit gaps top1-top2, top1-top3, top1-top5, the top-1
probability and the entropy of the renormalised top-20. Rank buckets of the target's token inside
the draft distribution: class 0 = rank 1, 1 = ranks 2-4, 2 = ranks 5-10, 3 = rank > 10 or outside
the draft vocabulary ("give up").
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

RANK_TOPK = 20  # logits summarised by the rank features
NUM_RANK_FEATURES = 15
RANK_CLASSES = 4
RANK_EDGES = (1, 4, 10)  # last rank of classes 0, 1, 2; class 3 is everything deeper
KV = tuple[torch.Tensor, torch.Tensor]  # keys, values of one layer


def cross_visible(query_pos: torch.Tensor, key_pos: torch.Tensor) -> torch.Tensor:
    """``[S, C]`` bool: a query at position ``query_pos [S]`` sees keys at ``key_pos [C]`` < it."""
    return key_pos[None, :] < query_pos[:, None]


def slot_keys_positions(positions: int, slots: int, first: int = 0) -> torch.Tensor:
    """``[positions * K]`` position of each flattened slot key ``(i, k)`` (``first + i``)."""
    return torch.arange(first, first + positions).repeat_interleave(slots)


def local_visible(valid: torch.Tensor, slots: int) -> torch.Tensor:
    """``[R, K, P*K + K]`` bool local visibility given ``valid [R, P]`` (slots visible in each of
    ``P`` earlier blocks at the same position, per row ``R``): prefix slot ``j`` of block ``m`` iff
    ``j < valid[m]``, own slot ``j`` iff ``j <= k``."""
    rows, prev = valid.shape
    j = torch.arange(slots)
    prefix = (j[None, None, :] < valid[:, :, None]).reshape(rows, 1, prev * slots)  # [R, 1, P*K]
    own = j[None, :] <= j[:, None]  # [K, K]
    return torch.cat(
        [prefix.expand(rows, slots, prev * slots), own[None].expand(rows, slots, slots)], -1
    )


@dataclass(frozen=True)
class Keys:
    """The keys one layer's queries attend to (``h_kv`` key/value heads, ``d`` head size).

    Attributes:
        local_k, local_v: ``[B, h_kv, S, L, d]`` keys at each query's own position.
        local_mask: ``[S | 1, K, L]`` bool.
        cross_k, cross_v: ``[B, h_kv, C, d]`` keys of other positions, or ``None``.
        cross_mask: ``[S | 1, C]`` bool (shared by the ``K`` slots of a position).
    """

    local_k: torch.Tensor
    local_v: torch.Tensor
    local_mask: torch.Tensor
    cross_k: torch.Tensor | None = None
    cross_v: torch.Tensor | None = None
    cross_mask: torch.Tensor | None = None


def slot_attention(q: torch.Tensor, keys: Keys, scale: float) -> torch.Tensor:
    """Softmax attention of ``q [B, h, S, K, d]`` over cross + local keys -> ``[B, h, S, K, d]``.

    Every query sees at least its own slot, so no row is empty.
    """
    b, h, s, k, d = q.shape
    hkv = keys.local_k.shape[1]
    qg = q.view(b, hkv, h // hkv, s, k, d)  # grouped-query heads share a key head
    neg = torch.finfo(q.dtype).min
    local = torch.einsum("bngskd,bnsld->bngskl", qg, keys.local_k) * scale  # [B, n, g, S, K, L]
    local = local.masked_fill(~keys.local_mask.to(q.device), neg)
    if keys.cross_k is None or keys.cross_k.shape[2] == 0:
        w = local.softmax(-1)
        out = torch.einsum("bngskl,bnsld->bngskd", w, keys.local_v)
        return out.reshape(b, h, s, k, d)
    cross = torch.einsum("bngskd,bncd->bngskc", qg, keys.cross_k) * scale  # [B, n, g, S, K, C]
    cross = cross.masked_fill(~keys.cross_mask.to(q.device)[:, None, :], neg)
    w = torch.cat([cross, local], -1).softmax(-1)
    c = cross.shape[-1]
    out = torch.einsum("bngskc,bncd->bngskd", w[..., :c], keys.cross_v) + torch.einsum(
        "bngskl,bnsld->bngskd", w[..., c:], keys.local_v
    )
    return out.reshape(b, h, s, k, d)


class AppendKeys:
    """Block 1: ``S`` new positions ``first..first+S-1`` join a cache of positions ``0..first-1``
    (``cache``: per layer ``[B, h_kv, first*K, d]``, or ``None``)."""

    def __init__(self, cache: list[KV] | None, positions: int, slots: int, first: int = 0):
        self.cache = cache
        query = torch.arange(first, first + positions)  # [S]
        self.cross_mask = cross_visible(query, slot_keys_positions(first + positions, slots))
        self.local_mask = local_visible(torch.zeros(1, 0, dtype=torch.long), slots)  # [1, K, K]

    def __call__(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> Keys:
        own_k, own_v = k.flatten(2, 3), v.flatten(2, 3)  # [B, h_kv, S*K, d]
        if self.cache is not None:
            own_k = torch.cat([self.cache[layer][0], own_k], 2)
            own_v = torch.cat([self.cache[layer][1], own_v], 2)
        return Keys(k, v, self.local_mask, own_k, own_v, self.cross_mask)


class ChainKeys:
    """Block >= 2: fixed cross keys (``cross``: per layer ``[B, h_kv, C, d]`` with ``cross_mask
    [S | 1, C]``) and the earlier blocks at the same position (``prefix``: per layer ``[B, h_kv, S,
    P*K, d]``, of which ``valid [S | 1, P]`` slots per block are visible)."""

    def __init__(
        self,
        cross: list[KV],
        cross_mask: torch.Tensor,
        prefix: list[KV],
        valid: torch.Tensor,
        slots: int,
    ):
        self.cross, self.cross_mask, self.prefix = cross, cross_mask, prefix
        self.local_mask = local_visible(valid, slots)  # [S | 1, K, P*K + K]

    def __call__(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> Keys:
        pk, pv = self.prefix[layer]
        return Keys(
            torch.cat([pk, k], 3),
            torch.cat([pv, v], 3),
            self.local_mask,
            self.cross[layer][0],
            self.cross[layer][1],
            self.cross_mask,
        )


def rank_features(logits: torch.Tensor) -> torch.Tensor:
    """``[..., 15]`` rank-head features of draft logits ``[..., V_d]`` (``V_d >= 20``)."""
    wide = logits.to(torch.promote_types(logits.dtype, torch.float32))  # bf16/fp16 -> fp32
    top = wide.topk(RANK_TOPK, -1).values  # [..., 20], descending
    logp = top - top.logsumexp(-1, keepdim=True)  # [..., 20]
    gaps = top[..., :1] - top[..., [1, 2, 4]]  # [..., 3]
    p1 = logp[..., :1].exp()  # [..., 1]
    entropy = -(logp.exp() * logp).sum(-1, keepdim=True)  # [..., 1]
    return torch.cat([logp[..., :10], gaps, p1, entropy], -1).to(logits.dtype)


def rank_buckets(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``[...]`` rank class of ``target [...]`` (index into the draft vocabulary, ``-1`` = not in
    it) under ``logits [..., V_d]``: rank = 1 + number of strictly larger logits."""
    picked = logits.gather(-1, target.clamp(min=0)[..., None])  # [..., 1]
    rank = 1 + (logits > picked).sum(-1)  # [...]
    bucket = torch.bucketize(rank, torch.tensor(RANK_EDGES, device=rank.device))
    return torch.where(target >= 0, bucket, RANK_CLASSES - 1)
