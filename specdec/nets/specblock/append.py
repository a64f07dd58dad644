"""Block 1 at new positions after a key cache, the decoding-time path of ``SpecBlockNet.block``.

Under ``AppendKeys`` the query of slot ``(i, k)`` sees every slot of each earlier position and
slots ``0..k`` of its own: with the slots flattened in order (key index ``j·K + l``), that is plain
causal attention over the sequence of slots. This path computes block 1 that way, with the same
weights and the same arithmetic up to the order of floating-point sums
(``tests/nets/test_specblock_append.py`` compares it with ``block``):

* attention is ``scaled_dot_product_attention`` over one contiguous key tensor (the cache and the
  new slots, which the caller's ``store`` joins, e.g. in a preallocated buffer), causal with the
  cache's offset, instead of masked scores over cross + local keys;
* what later forwards read of a position is its keys and values at every layer (all ``K`` slots:
  block 1 of a later position and block 2 at a later position attend to all of them), so every
  layer projects keys and values for every new slot; the last layer's attention output, MLP and
  heads feed nothing but the outputs, so they run only for the ``keep`` last positions (the
  drafter drafts below the last one).

A prompt of ``n`` tokens therefore costs one decoder layer over ``n·K`` slots per layer but the
last, the last layer's key/value projections, and the heads of ``keep`` positions.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import rotate_half

from specdec.nets.specblock.net import BlockOut, SlotAttention, SpecBlockNet
from specdec.nets.specblock.slots import KV

#: ``store(layer, k, v)`` with the new slots' keys/values ``[B, h_kv, S*K, d]`` returns the keys
#: and values of the cache followed by them, ``[B, h_kv, C + S*K, d]`` (``C`` cached slots)
Store = Callable[[int, torch.Tensor, torch.Tensor], KV]


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE of ``x [B, h, T, d]`` at ``cos, sin [B, T, d]`` (transformers' Llama rotation)."""
    return x * cos[:, None] + rotate_half(x) * sin[:, None]


def causal_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, first: int, scale: float
) -> torch.Tensor:
    """``q [B, h, Q, d]`` at flat slot indices ``first..first+Q-1`` over ``k, v [B, h_kv, T, d]``
    (indices ``0..T-1``): each query sees the keys at indices ``<=`` its own -> ``[B, h, Q, d]``."""
    b, heads, n, d = q.shape
    group = heads // k.shape[1]  # query heads per key head (grouped-query attention)
    if first == 0 and n == k.shape[2]:  # a whole trace: the causal kernel
        return F.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=scale, enable_gqa=group > 1
        )
    rows = torch.arange(first, first + n, device=q.device)  # [Q]
    mask = torch.arange(k.shape[2], device=q.device)[None, :] <= rows[:, None]  # [Q, T]
    # the group's queries side by side against their one key head: the cache is never copied
    qg = q.reshape(b, k.shape[1], group * n, d)  # heads h = j·group + i, as repeat_interleave
    out = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask.repeat(group, 1), scale=scale)
    return out.reshape(b, heads, n, d)  # a CUDA kernel may return it strided: no view


def _attend(
    attn: SlotAttention,
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    store: Callable[[torch.Tensor, torch.Tensor], KV],
    cached: int,
    queries: int,
) -> tuple[torch.Tensor, KV]:
    """One layer's attention: keys/values of every row of ``x [B, T, H]`` join the cache
    (``cached`` slots) through ``store``; only the last ``queries`` rows query them.
    Returns the attention output ``[B, queries, H]`` and the new rows' ``(k, v)``."""
    b, t, _ = x.shape
    k = attn.k_proj(x).view(b, t, attn.kv_heads, attn.head_dim).transpose(1, 2)
    v = attn.v_proj(x).view(b, t, attn.kv_heads, attn.head_dim).transpose(1, 2)
    k = _rope(k, cos, sin)  # [B, h_kv, T, d]
    keys, values = store(k, v)  # [B, h_kv, C + T, d]
    rows = slice(t - queries, t)
    q = attn.q_proj(x[:, rows]).view(b, queries, attn.heads, attn.head_dim).transpose(1, 2)
    q = _rope(q, cos[:, rows], sin[:, rows])  # [B, h, Q, d]
    out = causal_attention(q, keys, values, cached + t - queries, attn.head_dim**-0.5)
    return attn.o_proj(out.transpose(1, 2).reshape(b, queries, -1)), (k, v)


def append_block(
    net: SpecBlockNet,
    cond: torch.Tensor,
    embeds: torch.Tensor,
    first_pos: torch.Tensor,
    store: Store,
    cached: int,
    keep: int = 1,
) -> BlockOut:
    """Block 1 at ``S`` new positions after ``cached`` cached slots; outputs of the last ``keep``.

    Args:
        net: the SpecBlock network.
        cond: ``[B, S, H]`` block-1 conditions (``net.condition(f)``).
        embeds: ``[B, S, H]`` target embeddings of the tokens the positions read.
        first_pos: ``[B, S]`` RoPE position of slot 0 (slot k: ``+ k``).
        store: joins each layer's new keys/values to the cache (see ``Store``).
        cached: slots already cached (``C``; positions before these times ``K``).
        keep: the last positions whose outputs are returned (``1 <= keep <= S``).

    Returns:
        ``BlockOut`` with ``hidden``, ``logits``, ``rank_logits`` of the ``keep`` last positions
        and ``kv`` per layer the new slots' ``(k, v)``, each ``[B, h_kv, S, K, d]``.
    """
    b, s, _ = embeds.shape
    slots, last = net.slots, len(net.layers) - 1
    assert 1 <= keep <= s, (keep, s)
    cos, sin = net.slot_rope(embeds, first_pos)  # [B, S*K, d]
    z = net.fuse_slots(cond, embeds).reshape(b, s * slots, -1)  # [B, S*K, H]
    kvs = []
    for i, layer in enumerate(net.layers):
        # 1. The shift (every slot: the next layer's keys read it).
        if i > 0:
            z = net.shift(i, z.view(b, -1, slots, z.shape[-1])).flatten(1, 2)
        # 2. Attention: every slot's keys join the cache; the last layer queries for `keep` only.
        queries = keep * slots if i == last else s * slots
        a, kv = _attend(
            layer.self_attn,
            layer.input_layernorm(z),
            cos,
            sin,
            lambda k, v, i=i: store(i, k, v),
            cached,
            queries,
        )
        kvs.append(tuple(t.view(b, t.shape[1], s, slots, -1) for t in kv))
        # 3. Residual and MLP on the rows still needed.
        z = z[:, z.shape[1] - queries :] + a
        z = z + layer.mlp(layer.post_attention_layernorm(z))
    return net.heads(z.view(b, keep, slots, -1), kvs)
