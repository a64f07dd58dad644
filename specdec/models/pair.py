"""ModelPair: a target, an optional draft and the tokenizer they share; loading by hub id or path.

Every pair, the tiny random one included, ends up as a ``ModelPair``; ``describe()`` is the pair's
fingerprint in summaries, so the report refuses to compare runs on different pairs.

Every loader takes one ``Placement`` (``placement=``: the model config's ``placement:`` node, read
by ``Placement.from_config``) and honours its ``device`` and ``draft_device``; the entry point has
refused a device this machine does not have before any loader runs
(``specdec.models.placement.check_before_loading``). A big target is split over devices by the
placement's ``device_map`` / ``max_memory``; flash-attention is checked before loading
(``specdec.models.gpu``). The draft must share the target's tokenizer; its
output rows may differ from the target's by padding rows only (``specdec.vocab``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from specdec.errors import BadInput, MissingInput
from specdec.models.attention import use_cpu_attention
from specdec.models.devices import check_loaded
from specdec.models.gpu import check_attention
from specdec.models.kernel_probe import resolve_for
from specdec.models.placement import Placement
from specdec.models.placement_config import key_name
from specdec.static_cache import StaticSpec, static_spec
from specdec.vocab import check_rows


@dataclass
class ModelPair:
    """A target model, an optional draft model and their tokenizer."""

    name: str
    target: PreTrainedModel
    draft: PreTrainedModel | None
    tokenizer: PreTrainedTokenizerBase
    info: dict[str, str] = field(default_factory=dict)
    placement: Placement = field(default_factory=Placement.cpu)  # built once, by make_pair
    static_cache: StaticSpec | None = None  # CachedLM's static KV cache (None: dynamic)

    @property
    def draft_threads(self) -> int | None:
        """Torch threads for the draft's forwards (None: the process's)."""
        return self.placement.draft_threads

    def devices(self) -> list[torch.device]:
        """Every device holding weights of the pair (timing synchronises each of them)."""
        models = [m for m in (self.target, self.draft) if m is not None]
        found = {p.device for m in models for p in m.parameters()}
        return sorted(found, key=str)

    def describe(self) -> dict[str, str]:
        """Fingerprint of the pair: name, parameter counts, the placement (``Placement.describe``:
        device, dtype, kernel, attention, ...), and the loader's info (for run comparability)."""
        out = {
            "name": self.name,
            "target_params": str(sum(p.numel() for p in self.target.parameters())),
        }
        if self.draft is not None:
            out["draft_params"] = str(sum(p.numel() for p in self.draft.parameters()))
        return {**out, **self.placement.describe(), **self.info}


def check_vocab(
    target: PreTrainedModel,
    draft: PreTrainedModel | None,
    tokenizer: PreTrainedTokenizerBase,
    draft_tokenizer: PreTrainedTokenizerBase | None = None,
) -> None:
    """Refuse a draft that does not share the target's tokenizer (``specdec.vocab.check_rows``);
    output rows may differ in padding rows only."""
    if draft is None:
        return
    check_rows(output_rows(target), output_rows(draft), tokenizer, draft_tokenizer)


def output_rows(model: PreTrainedModel) -> int:
    """Rows of the model's output head (its logits' last dimension)."""
    return int(model.get_output_embeddings().weight.shape[0])


def make_pair(
    name: str,
    target: PreTrainedModel,
    draft: PreTrainedModel | None,
    tokenizer: PreTrainedTokenizerBase,
    info: dict[str, str],
    *,
    placement: Placement | None = None,
    draft_tokenizer: PreTrainedTokenizerBase | None = None,
    kernel_cache: str | Path | None = None,
) -> ModelPair:
    """Check the vocabularies, place the draft, set both models' CPU kernels, return the pair
    with the ``Placement`` it was built with (``specdec.models.placement``: recorded here once,
    for every loader).

    Every loader ends here, so the kernels are the same for target and draft, for ``ar`` and every
    method, and are recorded in the pair's fingerprint. The CPU kernels (``weight_stationary``,
    ``packed``) also switch ``sdpa`` attention to ``specdec_sdpa`` (``specdec.models.attention``:
    grouped queries without copied key/value heads); ``stock`` leaves both models as loaded.
    ``placement`` is the one the loader was given (None: the defaults): its ``draft_device``
    (default: the target's) and ``draft_threads`` (default: the process's torch threads) place the
    draft; the pair's placement records the target's input device, the kernel and attention
    the models ended up with and the process's threads. ``draft_tokenizer`` (the draft's own,
    when it has one) is compared token by token with ``tokenizer``; output rows that differ only
    in padding are recorded as ``draft_rows`` (with the target's) and reconciled by the draft's
    ``CachedLM`` (``specdec.vocab``). ``linear_kernel: auto`` is decided by a timed probe on this
    machine, cached under ``kernel_cache`` (``specdec.models.kernel_probe``; the choice and the
    probe's timings go into the fingerprint).
    """
    asked = Placement.from_config(placement)
    check_vocab(target, draft, tokenizer, draft_tokenizer)
    if draft is not None and output_rows(draft) != output_rows(target):
        # one key with "draft" in it: a draft-less `ar` baseline's target fingerprint still matches
        info = {**info, "draft_rows": f"{output_rows(draft)} (target {output_rows(target)})"}
    if draft is not None and not asked.draft_follows_target:
        draft = place_draft(target, draft, asked.draft_device)
    device = target.get_input_embeddings().weight.device  # where the target's inputs go
    choice = resolve_for(asked.linear_kernel, [target, draft], cache_dir=kernel_cache)
    kernel = choice.kernel
    if choice.note is not None:
        info = {**info, "linear_kernel_probe": choice.note}
    if kernel != "stock":
        use_cpu_attention(target)
        use_cpu_attention(draft)
    built = replace(
        asked,
        device=device,
        draft_device=device if asked.draft_follows_target else asked.draft_device,
        dtype=target.dtype,
        linear_kernel=kernel,
        attention=getattr(target.config, "_attn_implementation", None),
        threads=torch.get_num_threads(),
    )
    return ModelPair(
        name=name, target=target, draft=draft, tokenizer=tokenizer, info=info, placement=built
    )


def place_draft(
    target: PreTrainedModel, draft: PreTrainedModel, device: str | torch.device
) -> PreTrainedModel:
    """Move ``draft`` to ``device``; refuse when it shares weights with the target elsewhere.

    Moving a module moves its parameter objects in place, so a draft sharing the target's
    embedding (or layers) would drag the target's copy along.
    """
    dev = torch.device(device)  # a device this machine has: check_before_loading
    if next(draft.parameters()).device == dev:
        return draft
    shared = {id(p) for p in target.parameters()} & {id(p) for p in draft.parameters()}
    if shared:
        raise BadInput(
            f"the draft shares {len(shared)} weight tensors with the target, so it cannot move to "
            f"{key_name('draft_device')}={device} alone; leave it null (the target's device) "
            "or use a draft with weights of its own"
        )
    return draft.to(dev)


def from_hub(auto: type, name: str, key: str, **kwargs: object) -> object:
    """``auto.from_pretrained(name, **kwargs)``; a model that is neither a local folder nor in the
    hub cache (offline, gated, misspelt) raises ``MissingInput`` naming the download command."""
    try:
        return auto.from_pretrained(name, **kwargs)
    except OSError as err:  # transformers re-raises hub and file errors as OSError
        if Path(name).exists():
            raise  # a local folder that does not load is not a download problem
        reason = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise MissingInput(
            f"{key}={name!r} is not a local folder and could not be loaded from the hub cache "
            f"({reason}); download it once with `hf download {name}` (older clients: "
            f"`huggingface-cli download {name}`; a gated model needs `hf auth login` and its "
            f"license accepted on huggingface.co), or unset HF_HUB_OFFLINE to let transformers "
            f"fetch it; a local folder: check the path"
        ) from err


def load_pair(
    name: str,
    target: str,
    draft: str | None = None,
    *,
    placement: Placement | Mapping | None = None,
    trust_remote_code: bool = False,
    static_cache: bool = False,
    max_cache_len: int | None = None,
    cuda_graphs: bool | None = None,
) -> ModelPair:
    """Load a pair by hub id or local path with ``AutoModelForCausalLM``.

    Args:
        name: the pair's name (for summaries).
        target: hub id or local folder of the target.
        draft: hub id or local folder of the draft (``None``: no draft, AR only).
        placement: where and how the models load (``Placement.from_config``: the model config's
            ``placement:`` node, some of its keys, or a ``Placement``; None: CPU, float32):
            ``dtype``; ``device`` (the target's, unless ``device_map`` places it);
            ``attn_implementation`` (e.g. ``sdpa``, ``eager``, ``flash_attention_2``; None:
            default; ``specdec.models.gpu.check_attention``); ``linear_kernel``;
            ``draft_device`` / ``draft_threads``; ``device_map`` (``auto``, a device, or a dict
            of module -> device) within ``max_memory``, both passed to ``from_pretrained``.
        trust_remote_code: forwarded to transformers; keep ``False`` unless the config says so.
        static_cache, max_cache_len, cuda_graphs: the decoding caches' kind and their replay
            (``specdec.static_cache``, ``specdec.graphs``).
    """
    # 1. Refuse what cannot run before minutes of loading (the devices: the entry point's check).
    spec = static_spec(static_cache, max_cache_len, cuda_graphs)
    where = Placement.from_config(placement)
    check_attention(where.attention, device=str(where.device), dtype=where.dtype)
    kwargs = {"dtype": where.dtype, "trust_remote_code": trust_remote_code}
    if where.attention:
        kwargs["attn_implementation"] = where.attention
    # 2. The tokenizers (the draft's is compared token by token with the target's).
    tok = from_hub(AutoTokenizer, target, "model.target", trust_remote_code=trust_remote_code)
    draft_tok = None
    if draft is not None:
        draft_tok = from_hub(
            AutoTokenizer, draft, "model.draft", trust_remote_code=trust_remote_code
        )
    # 3. The target: on `device`, or placed by `device_map` within `max_memory`.
    info = {"target": target, "draft": str(draft)}
    if where.device_map is None:
        tgt = from_hub(AutoModelForCausalLM, target, "model.target", **kwargs)
        tgt = tgt.to(where.device).eval()
    else:
        placed = {"device_map": where.device_map, "max_memory": where.max_memory}
        tgt = from_hub(
            AutoModelForCausalLM,
            target,
            "model.target",
            **kwargs,
            **{k: v for k, v in placed.items() if v is not None},
        ).eval()
        check_loaded(tgt)
    # 4. The draft, straight onto its device.
    drf = None
    if draft is not None:
        drf = from_hub(AutoModelForCausalLM, draft, "model.draft", **kwargs)
        drf = drf.to(where.draft_device).eval()
    pair = make_pair(name, tgt, drf, tok, info, placement=where, draft_tokenizer=draft_tok)
    return with_static(pair, spec)


def with_static(pair: ModelPair, spec: StaticSpec | None) -> ModelPair:
    """``pair`` with its caches' kind; a static one is recorded in the fingerprint
    (``static_cache``: the slots, or ``grows`` for a cache sized to the run; ``cuda_graphs``: ``on``
    when the bucketed forwards are replayed, ``model.cuda_graphs`` null meaning on CUDA), as it
    changes timings."""
    if spec is None:
        return replace(pair, static_cache=None)
    graphs = spec.cuda_graphs  # None (auto): each CachedLM's is on when its model is on CUDA
    if graphs is None:
        graphs = next(pair.target.parameters()).device.type == "cuda"
    info = {**pair.info, "static_cache": str(spec.max_cache_len or "grows")}
    if graphs:
        info["cuda_graphs"] = "on"
    return replace(pair, static_cache=spec, info=info)
