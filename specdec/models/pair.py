"""ModelPair: a target, an optional draft and the tokenizer they share; loading by hub id or path.

Every pair, the tiny random one included, ends up as a ``ModelPair``; ``describe()`` is the pair's
fingerprint in summaries, so the report refuses to compare runs on different pairs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from specdec.models.attention import use_cpu_attention
from specdec.models.kernels import apply_linear_kernel, resolve_kernel

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "float16": torch.float16}


@dataclass
class ModelPair:
    """A target model, an optional draft model and their tokenizer."""

    name: str
    target: PreTrainedModel
    draft: PreTrainedModel | None
    tokenizer: PreTrainedTokenizerBase
    info: dict[str, str] = field(default_factory=dict)

    def describe(self) -> dict[str, str]:
        """Fingerprint of the pair: name, parameter counts, dtype (for run comparability)."""
        out = {"name": self.name, "dtype": str(self.target.dtype).replace("torch.", ""),
               "target_params": str(sum(p.numel() for p in self.target.parameters()))}
        if self.draft is not None:
            out["draft_params"] = str(sum(p.numel() for p in self.draft.parameters()))
        return {**out, **self.info}


def resolve_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose one of {sorted(DTYPES)}")
    return DTYPES[name]


def check_vocab(target: PreTrainedModel, draft: PreTrainedModel | None) -> None:
    """Raise ``ValueError`` naming both sizes when the output vocabularies differ."""
    if draft is None:
        return
    vt = target.get_output_embeddings().weight.shape[0]
    vd = draft.get_output_embeddings().weight.shape[0]
    if vt != vd:
        raise ValueError(
            f"target vocabulary size {vt} != draft vocabulary size {vd}: the draft must share the "
            "target's tokenizer (pick a matching draft in conf/model/)"
        )


def make_pair(
    name: str,
    target: PreTrainedModel,
    draft: PreTrainedModel | None,
    tokenizer: PreTrainedTokenizerBase,
    info: dict[str, str],
    *,
    linear_kernel: str = "auto",
) -> ModelPair:
    """Check the vocabularies, set both models' CPU kernels, and return the ``ModelPair``.

    Every loader ends here, so the kernels are the same for target and draft, for ``ar`` and every
    method, and are recorded in the pair's fingerprint. The CPU kernels (``weight_stationary``,
    ``packed``) also switch ``sdpa`` attention to ``specdec_sdpa`` (``specdec.models.attention``:
    grouped queries without copied key/value heads); ``stock`` leaves both models as loaded.
    """
    check_vocab(target, draft)
    kernel = resolve_kernel(linear_kernel, next(target.parameters()).device)
    apply_linear_kernel(target, kernel)
    apply_linear_kernel(draft, kernel)
    if kernel != "stock":
        use_cpu_attention(target)
        use_cpu_attention(draft)
    attention = getattr(target.config, "_attn_implementation", None) or "default"
    return ModelPair(name=name, target=target, draft=draft, tokenizer=tokenizer,
                     info={**info, "linear_kernel": kernel, "attention": attention})


def load_pair(
    name: str,
    target: str,
    draft: str | None = None,
    *,
    dtype: str = "float32",
    device: str = "cpu",
    trust_remote_code: bool = False,
    attn_implementation: str | None = None,
    linear_kernel: str = "auto",
) -> ModelPair:
    """Load a pair by hub id or local path with ``AutoModelForCausalLM``.

    Args:
        name: the pair's name (for summaries).
        target: hub id or local folder of the target.
        draft: hub id or local folder of the draft (``None``: no draft, AR only).
        dtype: one of ``float32 float64 bfloat16 float16``.
        device: torch device string.
        trust_remote_code: forwarded to transformers; keep ``False`` unless the config says so.
        attn_implementation: e.g. ``sdpa``, ``eager``, ``flash_attention_2`` (None: default).
        linear_kernel: ``auto`` | ``stock`` | ``weight_stationary`` | ``packed``
            (``specdec.models.kernels``).
    """
    kwargs = {"dtype": resolve_dtype(dtype), "trust_remote_code": trust_remote_code}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    tok = AutoTokenizer.from_pretrained(target, trust_remote_code=trust_remote_code)
    tgt = AutoModelForCausalLM.from_pretrained(target, **kwargs).to(device).eval()
    drf = None
    if draft is not None:
        drf = AutoModelForCausalLM.from_pretrained(draft, **kwargs).to(device).eval()
    return make_pair(name, tgt, drf, tok, {"target": target, "draft": str(draft)},
                     linear_kernel=linear_kernel)
