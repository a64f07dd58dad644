"""EAGLE-3's draft network: target features of three layers fused, one decoder layer, a small head.

Li et al. 2025, "EAGLE-3: Scaling up Inference Acceleration of Large Language Models via
Training-Time Test". Symbols: ``f_t`` = the target's hidden states at position ``t`` from its
low / middle / high layers (``target_layers``, indices into transformers' ``hidden_states``),
``e(x)`` = the target's (frozen, shared, never shipped) input embedding of token ``x``, ``g`` = the
condition of a draft position (``fuse(f_t)`` for a position the target has verified, the draft's
own output ``h`` of the parent position otherwise). A draft position ``t`` reads ``(g_t,
e(x_{t+1}))`` and predicts ``x_{t+2}``:

    z_t = fc([RMSNorm(e(x_{t+1})); RMSNorm(g_t)])        (2H -> H)
    h_t = Decoder(z_{≤t})                                 (one Llama decoder layer + final norm)
    logits_t = head(h_t)                                  (over the V_d mapped tokens)

The decoder is a one-layer ``ReducedVocabDraft`` (``models.reduced_draft``) driven through
``inputs_embeds``, so at decoding time a ``CachedLM`` owns its KV cache, tree masks and forward
log. The original feeds ``[e; g]`` straight into a 2H-wide attention; projecting to H first keeps
the stock decoder layer (no forked modeling file) and is the EAGLE-1 input path.

Published heads (SpecForge / SGLang / vLLM layouts, ``published.py``, ``interop.py``) load
through ``load_eagle3`` too. Shipped format (``save_eagle3`` / ``load_eagle3``): ``config.json``
(the decoder's Llama config plus ``eagle3``: target layers, draft vocabulary size, tokenizer
sha256, target hidden size / vocab) and ``model.safetensors`` (every tensor but the shared
embedding, plus ``token_map``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRMSNorm

from specdec.errors import BadInput
from specdec.models.cache_arg import cache_kwarg
from specdec.models.exact import exact_float64
from specdec.models.reduced_draft import (
    EMBED_KEY,
    ReducedVocabDraft,
    attach_embeddings,
    draft_config,
    init_from_target,
)
from specdec.models.shipped import (
    CONFIG,
    WEIGHTS,
    read_config,
    write_asset,
)
from specdec.nets.eagle3.feature_asset import check_target, load_weights, read_feature_drafter
from specdec.nets.eagle3.interop import layout, read_published, resolve_folder
from specdec.nets.eagle3.published import PublishedEagle3Net
from specdec.nets.eagle3.rotary import keep_rotary_float32

DECODER_EMBED_KEY = f"decoder.{EMBED_KEY}"


class Eagle3Net(nn.Module):
    """Fusion, input projection and a one-layer decoder over a reduced vocabulary.

    Args:
        decoder: a one-layer ``ReducedVocabDraft`` (its ``token_map`` is ``d2t``).
        target_layers: indices into the target's ``hidden_states`` read as features.
        target_hidden: the target's hidden size H (features are ``[k, H]``).
    """

    def __init__(
        self, decoder: ReducedVocabDraft, target_layers: Sequence[int], target_hidden: int
    ) -> None:
        super().__init__()
        if decoder.config.num_hidden_layers != 1:
            raise ValueError("the EAGLE-3 decoder has exactly one layer")
        hidden, eps = decoder.config.hidden_size, decoder.config.rms_norm_eps
        if hidden != target_hidden:
            raise ValueError(f"draft hidden size {hidden} != target hidden size {target_hidden}")
        self.target_layers = tuple(int(i) for i in target_layers)
        self.fuse = nn.Linear(len(self.target_layers) * hidden, hidden, bias=False)  # kH -> H
        self.norm_embed = LlamaRMSNorm(hidden, eps=eps)
        self.norm_cond = LlamaRMSNorm(hidden, eps=eps)
        self.fc = nn.Linear(2 * hidden, hidden, bias=False)  # [e; g] -> z
        self.decoder = decoder
        self.meta: dict = {
            "target_layers": list(self.target_layers),
            "target_hidden": hidden,
            "target_vocab": int(decoder.config.vocab_size),
            "draft_vocab_size": int(decoder.token_map.numel()),
        }
        exact_float64(self)  # float64 (tests) stays float64 in the norms (specdec.models.exact)
        keep_rotary_float32(self)  # a bfloat16 cast keeps RoPE's frequencies float32 (rotary.py)

    @property
    def hidden_size(self) -> int:
        return self.decoder.config.hidden_size

    def condition(self, features: torch.Tensor) -> torch.Tensor:
        """``[..., k, H]`` target features -> ``[..., H]`` condition ``g``."""
        return self.fuse(features.flatten(-2))

    def inputs(self, embeds: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """``z = fc([RMSNorm(e); RMSNorm(g)])``: ``[..., H]`` embeddings and conditions."""
        return self.fc(torch.cat([self.norm_embed(embeds), self.norm_cond(cond)], -1))

    def draft_step(
        self, inputs: torch.Tensor, *, cache, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training: ``[B, S, H]`` inputs ``z`` -> (``[B, S, V_d]`` logits, ``[B, S, H]`` next
        condition = the final-norm output); ``kwargs``: ``attention_mask``, ``position_ids``."""
        model = self.decoder.model
        h = model(
            inputs_embeds=inputs, **{cache_kwarg(model): cache}, use_cache=True, **kwargs
        ).last_hidden_state
        return self.decoder.lm_head(h), h


def new_eagle3(
    target,
    token_map: torch.Tensor,
    target_layers: Sequence[int],
    *,
    tokenizer_hash: str = "",
    seed: int = 0,
) -> Eagle3Net:
    """An ``Eagle3Net`` for ``target``: its decoder is a copy of the target's last layer, final
    norm and head rows (``init_from_target``); fusion and projection are seeded random."""
    n = target.config.num_hidden_layers
    for i in target_layers:
        if not -n - 1 <= int(i) <= n:
            raise BadInput(
                f"target layer {i} is out of range for a {n}-layer target "
                f"(hidden_states has {n + 1} entries)"
            )
    decoder = init_from_target(target, token_map, layers=[n - 1], tokenizer_hash=tokenizer_hash)
    gen = torch.Generator().manual_seed(seed)
    net = Eagle3Net(decoder, target_layers, target.config.hidden_size)
    with torch.no_grad():
        for lin in (net.fuse, net.fc):
            bound = lin.in_features**-0.5
            lin.weight.copy_(torch.rand(lin.weight.shape, generator=gen) * 2 * bound - bound)
    return net.to(dtype=target.dtype)


def remap_head(net: Eagle3Net, target, token_map: torch.Tensor) -> dict[str, int]:
    """Give a trained drafter the draft vocabulary ``token_map`` (``[V_d]`` sorted target ids).

    A warm start onto a new token map (e.g. one chosen from broader traces): head rows of tokens
    in both maps keep their trained weights, rows of tokens new to the map start from the
    target's head rows (as ``init_from_target`` does), dropped tokens are gone. The map size may
    change. Returns ``{"kept": ..., "new": ...}`` row counts.
    """
    dec = net.decoder
    old_map, new_map = dec.token_map.cpu(), token_map.long().cpu()  # [V_old], [V_new]
    assert new_map.dim() == 1 and new_map.unique().numel() == new_map.numel()
    pos = torch.full((int(dec.config.vocab_size),), -1, dtype=torch.long)
    pos[old_map] = torch.arange(old_map.numel())
    src = pos[new_map]  # [V_new]: row of the old head, -1 for a new token
    old_w = dec.lm_head.weight.detach()  # [V_old, H]
    rows = target.lm_head.weight.detach()[new_map].to(old_w)  # [V_new, H]
    kept = src >= 0
    rows[kept] = old_w[src[kept].to(old_w.device)]
    dec.lm_head = nn.Linear(rows.shape[1], rows.shape[0], bias=False).to(old_w)
    with torch.no_grad():
        dec.lm_head.weight.copy_(rows)
    dec.token_map = new_map.to(dec.token_map.device)
    dec.config.draft_vocab_size = int(new_map.numel())
    net.meta["draft_vocab_size"] = int(new_map.numel())
    return {"kept": int(kept.sum()), "new": int((~kept).sum())}


def save_eagle3(
    net: Eagle3Net,
    folder: str | Path,
    *,
    target_vocab: int,
    dtype: torch.dtype = torch.float32,
    max_shard_mib: float | None = None,
) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (without the shared embedding; shards of at
    most ``max_shard_mib`` when larger, ``models/shards.py``) atomically: a failed or killed
    export leaves the folder as it was (``shipped.replace_folder``)."""
    state = {
        k: (v.detach().to(dtype) if v.is_floating_point() else v.detach()).contiguous().cpu()
        for k, v in net.state_dict().items()
        if k != DECODER_EMBED_KEY
    }
    cfg = net.decoder.config.to_dict()
    cfg["eagle3"] = {**net.meta, "target_vocab": int(target_vocab)}
    return write_asset(folder, state, cfg, max_shard_mib=max_shard_mib)


def load_eagle3(
    folder: str | Path,
    target=None,
    *,
    tokenizer_hash: str | None = None,
    train_command: str = "python -m specdec.train +experiment=eagle3_<model>",
    target_layers: Sequence[int] | None = None,
) -> Eagle3Net | PublishedEagle3Net:
    """Load a shipped EAGLE-3 drafter; with ``target``, check it and attach its embedding.

    ``folder`` is a folder or a hub id cached offline (``interop.resolve_folder``) holding a head
    in our layout or a published one (``interop.layout``: ``eagle3_hf``, ``speculators``; those
    load as a ``PublishedEagle3Net``, whose ``target_layers`` default to the pinned ones, else to
    ``target_layers``, else to vLLM's default for ``target``).

    Without ``target`` the decoder has no embedding (decoding feeds it ``inputs_embeds`` built
    from the target's, ``TargetView.embed``) and ``net.meta`` keeps what ``check_target`` needs.

    Raises:
        FileNotFoundError: a missing file (names it and ``train_command``).
        ValueError: a drafter made for another target (hidden size, vocabulary, layers) or
            tokenizer, naming both sides; an unknown layout; a hub id not cached offline.
    """
    folder = resolve_folder(folder)
    if (folder / CONFIG).is_file():
        fix = (
            f"`{train_command}` (it exports to {folder}) or a released EAGLE-3 head for this target"
        )
        raw = read_config(folder, "EAGLE-3 drafter", fix)
        kind = layout(raw, folder, fix)
        if kind != "specdec":
            count = target.config.num_hidden_layers if target is not None else None
            layers = list(target_layers) if target_layers else None
            net = read_published(
                folder, raw, kind, target_layers_count=count, target_layers=layers, fix=fix
            )
            saved_hash = raw.get("tokenizer_sha256", "")
            if tokenizer_hash and saved_hash and saved_hash != tokenizer_hash:
                raise BadInput(
                    f"EAGLE-3 drafter in {folder} was made with another tokenizer; "
                    f"use a head for this target or `{train_command}`"
                )
            if target is not None:
                tcfg = target.config
                check_target(
                    net.meta,
                    hidden=tcfg.hidden_size,
                    vocab=tcfg.vocab_size,
                    layers=tcfg.num_hidden_layers,
                    where=f"in {folder}",
                    train_command=train_command,
                )
                net = net.to(dtype=target.dtype)
            return net
    raw, meta, state = read_feature_drafter(
        folder, "eagle3", "EAGLE-3", target, tokenizer_hash, train_command
    )
    cfg = draft_config(
        LlamaConfig.from_dict(raw),
        layers=1,
        draft_vocab_size=meta["draft_vocab_size"],
        tokenizer_hash=raw.get("tokenizer_sha256", ""),
    )
    net = Eagle3Net(ReducedVocabDraft(cfg), meta["target_layers"], meta["target_hidden"])
    net.meta = meta
    net.decoder.model.embed_tokens = None  # the target's is attached below or used through views
    load_weights(net, state, folder / WEIGHTS, "EAGLE-3", train_command)
    if target is not None:
        net = net.to(dtype=target.dtype)
        attach_embeddings(net.decoder, target)
    return net.eval()
