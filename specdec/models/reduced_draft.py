"""A small draft LM with a reduced output vocabulary and a token map (EAGLE-3 style head).

EAGLE-3 (Li et al. 2025, "Scaling up Inference Acceleration of LLMs via Training-Time Test") drafts
over a reduced vocabulary ``V_d`` (the most frequent target tokens) with a map ``d2t: V_d -> V``.
Here the draft is a standalone causal LM: the target's **frozen input embeddings** (shared at
runtime, never shipped), ``L`` Llama decoder layers (initialised from the target's), a final norm
and a head ``W [V_d, H]``. ``forward`` returns logits over the full vocabulary with ``-inf``
outside the map, so ``q = softmax`` is a proper distribution over ``V`` with zeros outside ``d2t``
and tokenwise verification stays exact; ``forward_reduced`` gives the ``[.., V_d]`` logits for
training.

Shipped format (``save_draft`` / ``load_draft``): ``config.json`` (a Llama config plus
``draft_vocab_size`` and ``tokenizer_sha256``) and ``model.safetensors`` (every tensor except the
embeddings, plus ``token_map``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from torch import nn
from transformers import GenerationMixin, LlamaConfig, LlamaModel, LlamaPreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from specdec.errors import BadInput, MissingInput
from specdec.models.cache_arg import cache_kwarg, output_cache_field
from specdec.models.exact import exact_float64
from specdec.models.shipped import (
    CONFIG,
    WEIGHTS,
    load_state,
    read_checkpoint,
    read_config,
    read_tensors,
    write_asset,
)

EMBED_KEY = "model.embed_tokens.weight"


class ReducedVocabDraft(LlamaPreTrainedModel, GenerationMixin):
    """Llama decoder layers + a head over ``draft_vocab_size`` tokens mapped into the full vocab.

    Args:
        config: a ``LlamaConfig`` whose ``vocab_size`` is the target's and which carries
            ``draft_vocab_size``.
    """

    _tied_weights_keys: dict = {}

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__(config)
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.draft_vocab_size, bias=False)
        self.register_buffer("token_map", torch.arange(config.draft_vocab_size), persistent=True)
        self.post_init()
        exact_float64(self)  # float64 (tests) stays float64 in the norms and RoPE

    def get_output_embeddings(self) -> nn.Module:
        # The *logical* output vocabulary is the full one: return the shared [V, H] embedding so
        # vocabulary checks see V (the real head is ``lm_head`` over the mapped tokens).
        return self.model.embed_tokens

    def hidden(self, input_ids: torch.Tensor, **kwargs) -> tuple[torch.Tensor, object]:
        out = self.model(input_ids=input_ids, **kwargs)
        return out.last_hidden_state, out  # [B, N, H]

    def forward_reduced(self, input_ids: torch.Tensor, **kwargs) -> torch.Tensor:
        """``[B, N, V_d]`` logits over the mapped tokens (training)."""
        h, _ = self.hidden(input_ids, **kwargs)
        return self.lm_head(h)

    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache=None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int = 0,
        past_key_values=None,  # the pre-rename name of `cache` (models/cache_arg.py)
        **kwargs,
    ) -> CausalLMOutputWithPast:
        cache = cache if cache is not None else past_key_values
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            **{cache_kwarg(self.model): cache},
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        h = out.last_hidden_state  # [B, N, H]
        if logits_to_keep:
            h = h[:, -logits_to_keep:]
        small = self.lm_head(h)  # [B, N, V_d]
        logits = small.new_full((*small.shape[:-1], self.config.vocab_size), float("-inf"))
        logits.index_copy_(-1, self.token_map, small)  # [B, N, V], -inf outside the map
        cached = getattr(out, output_cache_field(type(out)))  # the model's cache after the call
        return CausalLMOutputWithPast(
            logits=logits,
            hidden_states=out.hidden_states,
            **{output_cache_field(CausalLMOutputWithPast): cached},
        )


def tokenizer_sha256(tokenizer) -> str:
    """Fingerprint of a tokenizer's vocabulary (token -> id), to refuse mismatched drafts."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])
    return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode()).hexdigest()


def draft_config(
    target_config: LlamaConfig,
    *,
    layers: int,
    draft_vocab_size: int,
    tokenizer_hash: str = "",
    attention_bias: bool = False,
) -> LlamaConfig:
    """The draft's config: the target's shapes with ``layers`` layers and a reduced head;
    ``attention_bias``: Llama layers with projection biases (a Qwen2 target's q/k/v carry one
    its config does not name: ``qkv_bias``)."""
    cfg = LlamaConfig.from_dict(target_config.to_dict())
    cfg.attention_bias = bool(attention_bias or getattr(cfg, "attention_bias", False))
    cfg.num_hidden_layers = layers
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = cfg.layer_types[:layers]
    cfg.tie_word_embeddings = False
    cfg.draft_vocab_size = int(draft_vocab_size)
    cfg.tokenizer_sha256 = tokenizer_hash
    cfg.architectures = ["ReducedVocabDraft"]
    for key in ("quantization_config", "_name_or_path"):
        if hasattr(cfg, key):
            delattr(cfg, key)
    return cfg


def qkv_bias(target) -> bool:
    """Whether the target's attention projections carry a bias (Qwen2's q/k/v do)."""
    return target.model.layers[0].self_attn.q_proj.bias is not None


def copy_layer(dst: nn.Module, src: nn.Module) -> None:
    """Load a target decoder layer into a Llama draft layer. A Qwen2 layer has no ``o_proj``
    bias where a Llama layer with ``attention_bias`` has one: it starts at zero (the same map)."""
    missing, unexpected = dst.load_state_dict(src.state_dict(), strict=False)
    extra = [k for k in missing if not k.endswith("o_proj.bias")]
    if extra or unexpected:
        raise RuntimeError(
            f"cannot copy a {type(src).__name__} into a {type(dst).__name__}: "
            f"missing {extra}, unexpected {unexpected}"
        )
    for key in missing:
        dst.get_parameter(key).data.zero_()


def init_from_target(
    target, token_map: torch.Tensor, *, layers: list[int], tokenizer_hash: str = ""
) -> ReducedVocabDraft:
    """A draft initialised from the target: copies of ``layers``, its norm, its head rows.

    Args:
        target: a Llama-style causal LM (``model.layers``, ``model.norm``, ``lm_head``).
        token_map: ``[V_d]`` target token ids the draft can emit (sorted, unique).
        layers: which target layers to copy, in order.
    """
    assert token_map.dim() == 1 and token_map.unique().numel() == token_map.numel()
    cfg = draft_config(
        target.config,
        layers=len(layers),
        draft_vocab_size=token_map.numel(),
        tokenizer_hash=tokenizer_hash,
        attention_bias=qkv_bias(target),
    )
    draft = ReducedVocabDraft(cfg).to(target.dtype)
    with torch.no_grad():
        for i, j in enumerate(layers):
            copy_layer(draft.model.layers[i], target.model.layers[j])
        draft.model.norm.load_state_dict(target.model.norm.state_dict())
        draft.lm_head.weight.copy_(target.lm_head.weight[token_map])
        draft.token_map.copy_(token_map)
    attach_embeddings(draft, target)
    return draft


def attach_embeddings(draft: ReducedVocabDraft, target) -> None:
    """Share the target's input embedding module with the draft (frozen at training time)."""
    draft.model.embed_tokens = target.get_input_embeddings()


def save_draft(
    draft: ReducedVocabDraft, folder: str | Path, dtype: torch.dtype = torch.bfloat16
) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (no embeddings; floats stored as ``dtype``)
    atomically: a failed or killed export leaves the folder as it was."""
    state = {
        k: (v.detach().to(dtype) if v.is_floating_point() else v.detach()).contiguous().cpu()
        for k, v in draft.state_dict().items()
        if k != EMBED_KEY
    }
    return write_asset(folder, state, json.loads(draft.config.to_json_string()))


def load_draft(
    folder: str | Path,
    target,
    *,
    tokenizer=None,
    train_command: str = "python -m specdec.train +experiment=draft_lm_smollm2",
) -> ReducedVocabDraft:
    """Load a shipped draft and attach the target's embeddings.

    Raises:
        FileNotFoundError: the folder or a file is missing (names it and ``train_command``).
        ValueError: (``BadInput``) a corrupt file or NaN/inf weight (naming it), or a draft
            trained for another tokenizer / target shape.
    """
    folder = Path(folder)
    fix = f"`{train_command}` (it exports to {folder})"
    remedy = f"recreate it with {fix}"
    for name in (CONFIG, WEIGHTS):
        if not (folder / name).exists():
            raise MissingInput(f"draft file {folder / name} is missing; {remedy}")
    raw = read_config(folder, "draft", fix, keys=("vocab_size", "hidden_size", "draft_vocab_size"))
    try:
        cfg = LlamaConfig(**raw)
    except (TypeError, ValueError) as err:
        raise BadInput(f"draft files in {folder} are corrupt ({err}); {remedy}") from err
    state = read_tensors(folder / WEIGHTS, "draft", fix)
    expected = getattr(cfg, "tokenizer_sha256", "")
    if tokenizer is not None and expected and expected != tokenizer_sha256(tokenizer):
        raise BadInput(
            f"the draft in {folder} was trained for another tokenizer than the "
            f"target's; train a draft for this target: {train_command}"
        )
    if cfg.vocab_size != target.config.vocab_size or cfg.hidden_size != target.config.hidden_size:
        raise BadInput(
            f"the draft in {folder} (vocab {cfg.vocab_size}, hidden "
            f"{cfg.hidden_size}) does not fit the target (vocab "
            f"{target.config.vocab_size}, hidden {target.config.hidden_size}); "
            f"{remedy}"
        )
    with torch.device("meta"):
        draft = ReducedVocabDraft(cfg)
    attach_embeddings(draft, target)
    dtype = target.dtype
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    load_state(
        draft, state, folder / WEIGHTS, "draft", fix, ignore_missing=[EMBED_KEY], assign=True
    )
    draft.model.rotary_emb = type(draft.model.rotary_emb)(config=cfg)  # rebuild meta buffers
    return draft.eval()


def draft_from_checkpoint(ckpt_path: str | Path, target, tokenizer=None) -> ReducedVocabDraft:
    """Rebuild the draft from a ``DistillLearner`` Lightning checkpoint (keys ``net.*``).

    Raises:
        FileNotFoundError, ValueError: (``InputError``) a missing, truncated or foreign file.
    """
    cmd = "`python -m specdec.train +experiment=draft_lm_smollm2`"
    fix = f"point to a complete DistillLearner checkpoint or retrain one with {cmd}"
    state = read_checkpoint(ckpt_path, fix)["state_dict"]
    net = {k[len("net.") :]: v for k, v in state.items() if k.startswith("net.")}
    if "lm_head.weight" not in net:
        raise BadInput(
            f"training checkpoint {ckpt_path} holds no draft (no net.lm_head.weight); {fix}"
        )
    layers = 1 + max(int(k.split(".")[2]) for k in net if k.startswith("model.layers."))
    cfg = draft_config(
        target.config,
        layers=layers,
        draft_vocab_size=net["lm_head.weight"].shape[0],
        tokenizer_hash=tokenizer_sha256(tokenizer) if tokenizer else "",
    )
    draft = ReducedVocabDraft(cfg).to(target.dtype)
    attach_embeddings(draft, target)
    load_state(draft, net, ckpt_path, "draft", cmd, ignore_missing=[EMBED_KEY])
    return draft.eval()
