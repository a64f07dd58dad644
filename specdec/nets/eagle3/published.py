"""The published EAGLE-3 draft architecture (SpecForge, SGLang, vLLM), as an HF-style decoder.

The layout the released heads use (``LlamaForCausalLMEagle3``; read in vllm-project/vllm
``vllm/model_executor/models/llama_eagle3.py``, sgl-project/SpecForge and vllm-project/speculators
``src/speculators/models/eagle3/config.py``; no code copied). Symbols as in ``net.py``: ``e`` =
the target's input embedding of the next token, ``g`` = the condition (``fc`` of the three target
features for a verified position, the parent's ``h`` for a drafted node)::

    g = fc([f_low; f_mid; f_high])                            (3H -> H, ``fc.weight [H, 3H]``)
    x = [input_layernorm(e); hidden_norm(g)]                  (2H)
    a = o_proj(Attention(q_proj(x), k_proj(x), v_proj(x)))    (q/k/v read 2H, o_proj -> H)
    r = g + a            (``norm_before_residual``: hidden_norm(g) + a)
    h = r + mlp(post_attention_layernorm(r))                  (the next condition: pre-norm)
    logits = lm_head(norm(h))                                 (``[V_d]``; target id = d + d2t[d])

Ours (``net.Eagle3Net``) instead projects ``[RMSNorm(e); RMSNorm(g)]`` to H and runs a stock
layer, so neither net's weights can be written exactly in the other's layout.

Both nets share the interface the drafter uses: ``condition(features)``, ``inputs(embeds, cond)``
(here ``[e; g]`` concatenated, ``[N, 2H]``, fed as ``inputs_embeds``), ``.decoder`` (driven by a
``CachedLM``: HF forward with a transformers ``Cache``, 4-D tree masks, position ids) whose
*last* hidden state is the next condition (here the pre-norm ``h``, as vLLM passes it on: the
decoder's ``hidden_states`` are ``(g, h)``), ``.target_layers`` and ``.meta``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch
from torch import nn
from transformers import LlamaConfig, LlamaPreTrainedModel
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.models.llama.modeling_llama import (
    LlamaAttention,
    LlamaMLP,
    LlamaRMSNorm,
    LlamaRotaryEmbedding,
)

from specdec.models.cache_arg import cache_kwarg, output_cache_field
from specdec.models.reduced_draft import draft_config
from specdec.nets.eagle3.rotary import keep_rotary_float32

ARCH = "LlamaForCausalLMEagle3"  # the published heads' ``architectures`` entry
# create_causal_mask's cache keyword (``cache`` after transformers' rename, else past_key_values)
MASK_CACHE = (
    "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"
)


class Midlayer(nn.Module):
    """The one published decoder layer: a stock ``LlamaAttention`` whose q/k/v read ``2H``."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        hidden, eps, bias = config.hidden_size, config.rms_norm_eps, config.attention_bias
        self.self_attn = LlamaAttention(config, layer_idx=0)
        att = self.self_attn
        heads, kv = config.num_attention_heads, config.num_key_value_heads
        att.q_proj = nn.Linear(2 * hidden, heads * att.head_dim, bias=bias)  # 2H -> heads·d
        att.k_proj = nn.Linear(2 * hidden, kv * att.head_dim, bias=bias)  # 2H -> kv·d
        att.v_proj = nn.Linear(2 * hidden, kv * att.head_dim, bias=bias)  # 2H -> kv·d
        self.mlp = LlamaMLP(config)
        self.input_layernorm = LlamaRMSNorm(hidden, eps=eps)
        self.hidden_norm = LlamaRMSNorm(hidden, eps=eps)
        self.post_attention_layernorm = LlamaRMSNorm(hidden, eps=eps)
        self.norm_before_residual = bool(getattr(config, "norm_before_residual", False))

    def forward(
        self, embeds: torch.Tensor, cond: torch.Tensor, cache, **attn_kwargs
    ) -> torch.Tensor:
        """``[B, N, H]`` embeddings and conditions -> ``[B, N, H]`` pre-norm output ``h``."""
        normed = self.hidden_norm(cond)
        residual = normed if self.norm_before_residual else cond
        x = torch.cat([self.input_layernorm(embeds), normed], -1)  # [B, N, 2H]
        attn, _ = self.self_attn(
            hidden_states=x, **{cache_kwarg(self.self_attn): cache}, **attn_kwargs
        )  # [B, N, H]
        r = residual + attn
        return r + self.mlp(self.post_attention_layernorm(r))


class PublishedDecoder(LlamaPreTrainedModel):
    """``midlayer`` + ``norm`` + ``lm_head [V_d, H]`` with a ``token_map [V_d]`` (target ids).

    ``forward`` takes ``inputs_embeds = [e; g]`` (``[B, N, 2H]``) and returns logits over the
    full vocabulary (``config.vocab_size``, ``-inf`` outside the map) and ``hidden_states =
    (g, h)`` (``h`` before the final norm). It has no input embedding (the target's is used).
    """

    _tied_weights_keys: dict = {}
    _no_split_modules = ["Midlayer"]

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.midlayer = Midlayer(config)
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config=config)
        keep_rotary_float32(self.rotary_emb)  # float32 frequencies through casts (rotary.py)
        self.lm_head = nn.Linear(config.hidden_size, config.draft_vocab_size, bias=False)
        self.register_buffer("token_map", torch.arange(config.draft_vocab_size), persistent=True)
        self.post_init()

    def prenorm(
        self,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        cache,
    ) -> torch.Tensor:
        """``[B, N, 2H]`` inputs ``[e; g]`` -> ``[B, N, H]`` midlayer output ``h`` (pre-norm);
        ``attention_mask``: ``None`` (causal), 2-D padding or 4-D additive, as in transformers."""
        embeds, cond = inputs_embeds.chunk(2, dim=-1)  # [B, N, H] each
        if position_ids is None:
            past = cache.get_seq_length() if cache is not None else 0
            position_ids = torch.arange(past, past + cond.shape[1], device=cond.device)[None]
        mask = create_causal_mask(
            config=self.config,
            inputs_embeds=cond,
            attention_mask=attention_mask,
            position_ids=position_ids,
            **{MASK_CACHE: cache},
        )
        return self.midlayer(
            embeds,
            cond,
            cache,
            attention_mask=mask,
            position_ids=position_ids,
            position_embeddings=self.rotary_emb(cond, position_ids),
        )

    @property
    def inputs_embeds_width(self) -> int:
        """The width of ``inputs_embeds``: ``[e; g]`` is ``2H``."""
        return 2 * self.config.hidden_size

    def get_input_embeddings(self) -> None:
        return None  # fed ``inputs_embeds`` only (``CachedLM.takes_ids`` is false)

    def get_output_embeddings(self) -> None:
        # the logical output is the target's vocabulary (``config.vocab_size``; ``lm_head`` holds
        # only the mapped rows): a ``CachedLM`` of this decoder is given ``vocab_size``
        return None

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache=None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        past_key_values=None,  # the pre-rename name of `cache` (models/cache_arg.py)
        **kwargs,
    ) -> CausalLMOutputWithPast:
        cache = cache if cache is not None else past_key_values
        if inputs_embeds is None:
            raise ValueError("the EAGLE-3 decoder takes inputs_embeds = [e; g] ([B, N, 2H])")
        h = self.prenorm(inputs_embeds, attention_mask, position_ids, cache)  # [B, N, H]
        small = self.lm_head(self.norm(h))  # [B, N, V_d]
        logits = small.new_full((*small.shape[:-1], self.config.vocab_size), float("-inf"))
        logits.index_copy_(-1, self.token_map, small)  # [B, N, V]
        hidden = (inputs_embeds.chunk(2, -1)[1], h) if output_hidden_states else None
        return CausalLMOutputWithPast(
            logits=logits,
            hidden_states=hidden,
            **{output_cache_field(CausalLMOutputWithPast): cache},
        )


class PublishedEagle3Net(nn.Module):
    """``fc`` (features -> condition) and a ``PublishedDecoder``; the drafter's net interface.

    Args:
        decoder: the decoder (its ``token_map`` is ``arange(V_d) + d2t``).
        target_layers: indices into the target's ``hidden_states`` read as features.
        target_hidden: the target's hidden size (``fc`` reads ``k·target_hidden``).
    """

    def __init__(
        self, decoder: PublishedDecoder, target_layers: Sequence[int], target_hidden: int
    ) -> None:
        super().__init__()
        self.target_layers = tuple(int(i) for i in target_layers)
        hidden = decoder.config.hidden_size
        self.fc = nn.Linear(len(self.target_layers) * target_hidden, hidden, bias=False)
        self.decoder = decoder
        self.meta: dict = {
            "target_layers": list(self.target_layers),
            "target_hidden": int(target_hidden),
            "target_vocab": int(decoder.config.vocab_size),
            "draft_vocab_size": int(decoder.token_map.numel()),
        }

    @property
    def hidden_size(self) -> int:
        return self.decoder.config.hidden_size

    def condition(self, features: torch.Tensor) -> torch.Tensor:
        """``[..., k, H]`` target features -> ``[..., H]`` condition ``g``."""
        return self.fc(features.flatten(-2))

    def inputs(self, embeds: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """``[..., H]`` embeddings and conditions -> ``[..., 2H]`` decoder input ``[e; g]``."""
        return torch.cat([embeds, cond.to(embeds.dtype)], -1)

    def draft_step(
        self, inputs: torch.Tensor, *, cache, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training: ``[B, S, 2H]`` inputs -> (``[B, S, V_d]`` logits, ``[B, S, H]`` next
        condition = the pre-norm output); ``kwargs``: ``attention_mask``, ``position_ids``."""
        h = self.decoder.prenorm(
            inputs, kwargs.get("attention_mask"), kwargs.get("position_ids"), cache
        )
        return self.decoder.lm_head(self.decoder.norm(h)), h


def new_published(
    target,
    token_map: torch.Tensor,
    target_layers: Sequence[int],
    *,
    tokenizer_hash: str = "",
    seed: int = 0,
) -> PublishedEagle3Net:
    """A ``PublishedEagle3Net`` for ``target`` (its shapes; to train, ``learner.arch=eagle3``).

    Initialised from the target's last layer: attention, MLP and norms (both input norms from
    its ``input_layernorm``; q/k/v read ``(n(e) + n(g)) / 2``: the layer's weights halved on both
    input halves), final norm and head rows; ``fc`` is seeded uniform like ``net.new_eagle3``'s.
    """
    cfg = draft_config(
        target.config,
        layers=1,
        draft_vocab_size=int(token_map.numel()),
        tokenizer_hash=tokenizer_hash,
    )
    cfg.architectures = [ARCH]
    net = PublishedEagle3Net(PublishedDecoder(cfg), target_layers, target.config.hidden_size)
    layer, dec = target.model.layers[-1], net.decoder
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name in ("q_proj", "k_proj", "v_proj"):
            w = getattr(layer.self_attn, name).weight  # [out, H]
            getattr(dec.midlayer.self_attn, name).weight.copy_(torch.cat([w, w], 1) / 2)
        dec.midlayer.self_attn.o_proj.load_state_dict(layer.self_attn.o_proj.state_dict())
        dec.midlayer.mlp.load_state_dict(layer.mlp.state_dict())
        for norm in ("input_layernorm", "hidden_norm"):
            getattr(dec.midlayer, norm).load_state_dict(layer.input_layernorm.state_dict())
        dec.midlayer.post_attention_layernorm.load_state_dict(
            layer.post_attention_layernorm.state_dict()
        )
        dec.norm.load_state_dict(target.model.norm.state_dict())
        dec.lm_head.weight.copy_(target.lm_head.weight[token_map])
        dec.token_map.copy_(token_map)
        bound = net.fc.in_features**-0.5
        net.fc.weight.copy_(torch.rand(net.fc.weight.shape, generator=gen) * 2 * bound - bound)
    return net.to(dtype=target.dtype)
