"""SpecBlock's draft network: one forward drafts a *block* of K dependent slots per position.

SpecBlock ("SpecBlock: Block-Iterative Speculative Decoding with Dynamic Tree Drafting";
public code github.com/shiweijiezero/SpecBlock, its ``forward_parallel``). Symbols: ``f_i`` = the
target's hidden states of ``target_layers`` at position ``i`` (indices into transformers'
``hidden_states``),
``e(x)`` = the target's frozen input embedding (shared, never shipped), ``E_pos[k]`` = the learnable
query of slot ``k``. Position ``i`` reads ``(f_i, x_{i+1})``; its slot ``k`` predicts ``x_{i+k+2}``:

    c_i     = RMSNorm(W_c f_i)   (block 1)  |  RMSNorm(h_{i,M-1}) of the previous block (block >= 2)
    z_{i,k} = W_f [c_i ; RMSNorm(e(x_{i+1})) ; RMSNorm(E_pos[k])]        (3H -> H)
    before layer l > 0:  z_{i,k} <- W_shift^(l) [z_{i,k} ; z_{i,k-1}]    (2H -> H; slot 0: itself)
    z <- decoder layer l (RMSNorm, attention under the slot masks, RMSNorm, SwiGLU)
    h_{i,k} = z_{i,k}  (pre-norm, the condition of a later block)
    logits_{i,k} = W_head RMSNorm(h_{i,k})                        (over the V_d mapped tokens, d2t)
    rank_{i,k}   = RankHead([stopgrad RMSNorm(h_{i,k}) ; 15 features of logits_{i,k}])  (4 classes)

RoPE position of slot ``(i, k)`` of a block started ``o`` tokens after position ``i``'s first
block: ``i + 1 + o + k`` (the code's ``i + 1 + k`` for block 1; later blocks are not spelled out
there, and ``o + k`` keeps the position of the token each slot reads). The masks and the key
sources below are in ``slots.py``; the attention is written out with explicit per-layer key/value
tensors passed in and returned (an HF decoder stack has no place for slot masks and between-layer
shifts).

Key sources (``keys`` argument of ``SpecBlockNet.block``): ``AppendKeys`` for block 1 (the new
positions join the cross sequence after a cache of earlier positions, so a trace in one forward
equals the same positions appended one by one), ``ChainKeys`` for later blocks (a fixed block-1
sequence plus a valid prefix of the earlier blocks at the same position).

Init: decoder layers copy the target's last ``L`` layers, the final norm and head rows come from
the target (as EAGLE-3's), ``W_shift = [I, 0]`` (no shift at first), the rest is seeded random.
The shipped format (``save_specblock`` / ``load_specblock``) is in ``store.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import (
    LlamaMLP,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)

from specdec.errors import BadInput
from specdec.models.exact import exact_float64
from specdec.models.reduced_draft import copy_layer, draft_config, qkv_bias
from specdec.nets.specblock.slots import (
    KV,
    NUM_RANK_FEATURES,
    RANK_CLASSES,
    RANK_TOPK,
    AppendKeys,
    ChainKeys,
    Keys,
    rank_features,
    slot_attention,
)


class BlockOut(NamedTuple):
    """One block: ``hidden [B, S, K, H]`` (pre-norm), ``logits [B, S, K, V_d]``, ``rank_logits
    [B, S, K, 4]``, ``kv``: per layer ``(k, v)`` each ``[B, h_kv, S, K, d]`` (RoPE applied)."""

    hidden: torch.Tensor
    logits: torch.Tensor
    rank_logits: torch.Tensor
    kv: list[KV]


class SlotAttention(nn.Module):
    """Llama attention projections (names as transformers', so target layers load) over ``Keys``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        h, self.heads, self.kv_heads = (
            config.hidden_size,
            config.num_attention_heads,
            config.num_key_value_heads,
        )
        self.head_dim = getattr(config, "head_dim", None) or h // self.heads
        bias = bool(config.attention_bias)
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        keys: Callable[[torch.Tensor, torch.Tensor], Keys],
    ) -> tuple[torch.Tensor, KV]:
        b, s, k, _ = x.shape
        flat = x.reshape(b, s * k, -1)  # [B, S*K, H]
        q = self.q_proj(flat).view(b, s * k, self.heads, self.head_dim).transpose(1, 2)
        kk = self.k_proj(flat).view(b, s * k, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(flat).view(b, s * k, self.kv_heads, self.head_dim).transpose(1, 2)
        q, kk = apply_rotary_pos_emb(q, kk, cos, sin)  # [B, h, S*K, d], [B, h_kv, S*K, d]
        q = q.reshape(b, self.heads, s, k, self.head_dim)
        kv = (
            kk.reshape(b, self.kv_heads, s, k, self.head_dim),
            v.reshape(b, self.kv_heads, s, k, self.head_dim),
        )
        out = slot_attention(q, keys(*kv), self.head_dim**-0.5)  # [B, h, S, K, d]
        return self.o_proj(out.permute(0, 2, 3, 1, 4).reshape(b, s, k, -1)), kv


class SlotLayer(nn.Module):
    """A Llama decoder layer over slots: ``z + attn(norm z)``, then ``+ mlp(norm)``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.self_attn = SlotAttention(config)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, z, cos, sin, keys) -> tuple[torch.Tensor, KV]:
        a, kv = self.self_attn(self.input_layernorm(z), cos, sin, keys)
        z = z + a
        return z + self.mlp(self.post_attention_layernorm(z)), kv


class SpecBlockNet(nn.Module):
    """Condition, fusion with slot queries, shifted slot decoder, reduced-vocabulary and rank heads.

    Args:
        config: the decoder's Llama config (``num_hidden_layers`` = L, ``draft_vocab_size``).
        target_layers: indices into the target's ``hidden_states`` read as features.
        slots: K, slots per block.
        rank_hidden: width of the rank head's hidden layer.
    """

    def __init__(
        self,
        config: LlamaConfig,
        target_layers: Sequence[int],
        slots: int = 4,
        rank_hidden: int = 256,
    ) -> None:
        super().__init__()
        h, eps, vd = config.hidden_size, config.rms_norm_eps, int(config.draft_vocab_size)
        if slots < 1 or config.num_hidden_layers < 1:
            raise ValueError(
                f"SpecBlock needs >= 1 slot and layer, got {slots}, {config.num_hidden_layers}"
            )
        if vd < RANK_TOPK:
            raise ValueError(
                f"the draft vocabulary has {vd} tokens; the rank features read the "
                f"top {RANK_TOPK}: raise the token map size"
            )
        self.config, self.slots = config, int(slots)
        self.target_layers = tuple(int(i) for i in target_layers)
        self.cond_proj = nn.Linear(len(self.target_layers) * h, h, bias=False)  # W_c: kH -> H
        self.norm_cond, self.norm_token, self.norm_query = (
            LlamaRMSNorm(h, eps=eps) for _ in range(3)
        )
        self.queries = nn.Parameter(torch.zeros(self.slots, h))  # E_pos: [K, H]
        self.fuse = nn.Linear(3 * h, h, bias=False)  # W_f
        self.layers = nn.ModuleList(SlotLayer(config) for _ in range(config.num_hidden_layers))
        self.shifts = nn.ModuleList(
            nn.Linear(2 * h, h, bias=False) for _ in range(config.num_hidden_layers - 1)
        )
        self.norm = LlamaRMSNorm(h, eps=eps)
        self.head = nn.Linear(h, vd, bias=False)
        self.rank_head = nn.Sequential(
            nn.Linear(h + NUM_RANK_FEATURES, rank_hidden, bias=False),
            nn.SiLU(),
            nn.Linear(rank_hidden, RANK_CLASSES, bias=False),
        )
        self.rotary = LlamaRotaryEmbedding(config)
        self.register_buffer("token_map", torch.arange(vd), persistent=True)  # d2t: [V_d]
        self.meta: dict = {
            "target_layers": list(self.target_layers),
            "target_hidden": h,
            "target_vocab": int(config.vocab_size),
            "draft_vocab_size": vd,
            "slots": self.slots,
            "rank_hidden": int(rank_hidden),
        }
        exact_float64(self)  # float64 (tests) stays float64 in norms and RoPE (models.exact)

    def condition(self, features: torch.Tensor) -> torch.Tensor:
        """``[..., k, H]`` target features -> ``[..., H]`` block-1 condition (before its norm)."""
        return self.cond_proj(features.flatten(-2))

    def block(
        self,
        cond: torch.Tensor,
        embeds: torch.Tensor,
        first_pos: torch.Tensor,
        keys: AppendKeys | ChainKeys,
    ) -> BlockOut:
        """One block at ``S`` positions (or leaves) of ``B`` rows.

        Args:
            cond: ``[B, S, H]`` conditions (``condition(f)``, or a previous block's hidden).
            embeds: ``[B, S, H]`` target embeddings of the tokens the positions read.
            first_pos: ``[B, S]`` RoPE position of slot 0 (slot k: ``+ k``).
            keys: ``AppendKeys`` (block 1) or ``ChainKeys`` (later blocks).
        """
        cos, sin = self.slot_rope(embeds, first_pos)  # [B, S*K, d]
        z = self.fuse_slots(cond, embeds)  # [B, S, K, H]
        kvs = []
        for i, layer in enumerate(self.layers):
            # 1. Layer-wise shift: mix slot k with slot k-1 of the previous layer (slot 0: itself).
            if i > 0:
                z = self.shift(i, z)
            # 2. The decoder layer under the block's masks.
            z, kv = layer(z, cos, sin, lambda k, v, i=i: keys(i, k, v))
            kvs.append(kv)
        return self.heads(z, kvs)

    def slot_rope(
        self, embeds: torch.Tensor, first_pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE ``cos, sin [B, S*K, d]`` of every slot: slot ``k`` at ``first_pos [B, S] + k``."""
        b, s, _ = embeds.shape
        pos = first_pos[..., None] + torch.arange(self.slots, device=first_pos.device)  # [B,S,K]
        return self.rotary(embeds, pos.reshape(b, s * self.slots))

    def fuse_slots(self, cond: torch.Tensor, embeds: torch.Tensor) -> torch.Tensor:
        """``z [B, S, K, H]``: ``W_f [c ; e ; E_pos[k]]`` with their norms (the fusion)."""
        hid = embeds.shape[-1]
        w = self.fuse.weight  # [H, 3H]
        base = F.linear(
            torch.cat([self.norm_cond(cond), self.norm_token(embeds)], -1), w[:, : 2 * hid]
        )  # [B, S, H]
        return base[:, :, None] + F.linear(self.norm_query(self.queries), w[:, 2 * hid :])

    def shift(self, layer: int, z: torch.Tensor) -> torch.Tensor:
        """Before layer ``layer > 0``: ``W_shift [z_k ; z_{k-1}]`` (slot 0 reads itself)."""
        prev = torch.cat([z[:, :, :1], z[:, :, :-1]], 2)  # [B, S, K, H]
        return self.shifts[layer - 1](torch.cat([z, prev], -1))

    def heads(self, z: torch.Tensor, kvs: list[KV]) -> BlockOut:
        """The block's output from the last layer's ``z [B, S, K, H]``: norm, head, rank head."""
        normed = self.norm(z)  # [B, S, K, H]
        logits = self.head(normed)  # [B, S, K, V_d]
        feats = torch.cat([normed.detach(), rank_features(logits.detach())], -1)  # [.., H+15]
        return BlockOut(z, logits, self.rank_head(feats), kvs)


def new_specblock(
    target,
    token_map: torch.Tensor,
    target_layers: Sequence[int],
    *,
    slots: int = 4,
    layers: int = 2,
    rank_hidden: int = 256,
    tokenizer_hash: str = "",
    seed: int = 0,
) -> SpecBlockNet:
    """A ``SpecBlockNet`` for the Llama-style ``target``: its last ``layers`` decoder layers,
    final norm and head rows ``token_map [V_d]``; seeded random fusion, queries and rank head."""
    n = target.config.num_hidden_layers
    for i in target_layers:
        if not -n - 1 <= int(i) <= n:
            raise BadInput(
                f"target layer {i} is out of range for a {n}-layer target "
                f"(hidden_states has {n + 1} entries)"
            )
    if not 1 <= layers <= n:
        raise BadInput(f"learner.layers must be in 1..{n} (copied from the target), got {layers}")
    cfg = draft_config(
        target.config,
        layers=layers,
        draft_vocab_size=token_map.numel(),
        tokenizer_hash=tokenizer_hash,
        attention_bias=qkv_bias(target),
    )
    net = SpecBlockNet(cfg, target_layers, slots, rank_hidden)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for i, j in enumerate(range(n - layers, n)):
            copy_layer(net.layers[i], target.model.layers[j])
        net.norm.load_state_dict(target.model.norm.state_dict())
        net.head.weight.copy_(target.lm_head.weight[token_map])
        net.token_map.copy_(token_map)
        for lin in (net.cond_proj, net.fuse, net.rank_head[0], net.rank_head[2]):
            bound = lin.in_features**-0.5
            lin.weight.copy_(torch.rand(lin.weight.shape, generator=gen) * 2 * bound - bound)
        net.queries.copy_(torch.randn(net.queries.shape, generator=gen) * 0.02)
        for shift in net.shifts:
            h = shift.out_features
            shift.weight.zero_()
            shift.weight[:, :h].copy_(torch.eye(h))
    return net.to(dtype=target.dtype)
