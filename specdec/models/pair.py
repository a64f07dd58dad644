"""ModelPair: a target, an optional draft and the tokenizer they share; loading by hub id or path.

Every pair, the tiny random one included, ends up as a ``ModelPair``; ``describe()`` is the pair's
fingerprint in summaries, so the report refuses to compare runs on different pairs.

Every loader honours ``device`` (and ``draft_device``) or fails: ``check_before_loading`` refuses
a device this machine does not have (``device=cuda`` on a CPU-only machine) before any weights load,
instead of running on the CPU under a ``cuda`` label. A big target is split over devices by
``model.device_map`` / ``model.max_memory`` (``specdec.models.placement``); flash-attention is
checked before loading (``specdec.models.gpu``). The draft must share the target's tokenizer; its
output rows may differ from the target's by padding rows only (``specdec.vocab``).
"""

from __future__ import annotations

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
from specdec.models.gpu import check_attention
from specdec.models.kernel_probe import resolve_for
from specdec.models.placement import DeviceMap, Placement, check_before_loading, check_loaded
from specdec.static_cache import StaticSpec, static_spec
from specdec.vocab import check_rows

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
        out = {"name": self.name,
               "target_params": str(sum(p.numel() for p in self.target.parameters()))}
        if self.draft is not None:
            out["draft_params"] = str(sum(p.numel() for p in self.draft.parameters()))
        return {**out, **self.placement.describe(), **self.info}


def resolve_dtype(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise BadInput(f"unknown dtype {name!r}; choose one of {sorted(DTYPES)}")
    return DTYPES[name]


def check_vocab(target: PreTrainedModel, draft: PreTrainedModel | None,
                tokenizer: PreTrainedTokenizerBase,
                draft_tokenizer: PreTrainedTokenizerBase | None = None) -> None:
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
    linear_kernel: str = "auto",
    draft_device: str | None = None,
    draft_threads: int | None = None,
    draft_tokenizer: PreTrainedTokenizerBase | None = None,
    kernel_cache: str | Path | None = None,
    device_map: DeviceMap = None,
) -> ModelPair:
    """Check the vocabularies, place the draft, set both models' CPU kernels, return the pair
    with its ``Placement`` (``specdec.models.placement``: built here once, for every loader).

    Every loader ends here, so the kernels are the same for target and draft, for ``ar`` and every
    method, and are recorded in the pair's fingerprint. The CPU kernels (``weight_stationary``,
    ``packed``) also switch ``sdpa`` attention to ``specdec_sdpa`` (``specdec.models.attention``:
    grouped queries without copied key/value heads); ``stock`` leaves both models as loaded.
    ``draft_device`` (default: the target's) and ``draft_threads`` (default: the process's torch
    threads) place the draft; the placement is recorded in the fingerprint. ``draft_tokenizer``
    (the draft's own, when it has one) is compared token by token with ``tokenizer``; output rows
    that differ only in padding are recorded as ``draft_rows`` (with the target's) and reconciled
    by the draft's ``CachedLM`` (``specdec.vocab``). ``linear_kernel: auto`` is decided by a
    timed probe on this machine, cached under ``kernel_cache`` (``specdec.models.kernel_probe``;
    the choice and the probe's timings go into the fingerprint).
    """
    check_vocab(target, draft, tokenizer, draft_tokenizer)
    if draft is not None and output_rows(draft) != output_rows(target):
        # one key with "draft" in it: a draft-less `ar` baseline's target fingerprint still matches
        info = {**info, "draft_rows": f"{output_rows(draft)} (target {output_rows(target)})"}
    if draft_threads is not None and draft_threads < 1:
        raise BadInput(f"model.draft_threads must be >= 1 or null, got {draft_threads}")
    if draft is not None and draft_device is not None:
        draft = place_draft(target, draft, draft_device)
    device = target.get_input_embeddings().weight.device  # where the target's inputs go
    choice = resolve_for(linear_kernel, [target, draft], cache_dir=kernel_cache)
    kernel = choice.kernel
    if choice.note is not None:
        info = {**info, "linear_kernel_probe": choice.note}
    if kernel != "stock":
        use_cpu_attention(target)
        use_cpu_attention(draft)
    placement = Placement(
        device=device, draft_device=device if draft_device is None else torch.device(draft_device),
        dtype=target.dtype, linear_kernel=kernel,
        attention=getattr(target.config, "_attn_implementation", None), device_map=device_map,
        threads=torch.get_num_threads(), draft_threads=draft_threads)
    return ModelPair(name=name, target=target, draft=draft, tokenizer=tokenizer, info=info,
                     placement=placement)


def place_draft(target: PreTrainedModel, draft: PreTrainedModel, device: str) -> PreTrainedModel:
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
            f"model.draft_device={device} alone; leave draft_device null (the target's device) "
            "or use a draft with weights of its own")
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
            f"fetch it; a local folder: check the path") from err


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
    draft_device: str | None = None,
    draft_threads: int | None = None,
    device_map: DeviceMap = None,
    max_memory: dict | None = None,
    static_cache: bool = False,
    max_cache_len: int | None = None,
    cuda_graphs: bool | None = None,
) -> ModelPair:
    """Load a pair by hub id or local path with ``AutoModelForCausalLM``.

    Args:
        name: the pair's name (for summaries).
        target: hub id or local folder of the target.
        draft: hub id or local folder of the draft (``None``: no draft, AR only).
        dtype: one of ``float32 float64 bfloat16 float16``.
        device: torch device string (the target's, unless ``device_map`` places it).
        trust_remote_code: forwarded to transformers; keep ``False`` unless the config says so.
        attn_implementation: e.g. ``sdpa``, ``eager``, ``flash_attention_2`` (None: default;
            ``specdec.models.gpu.check_attention``).
        linear_kernel: ``auto`` | ``stock`` | ``weight_stationary`` | ``packed``
            (``specdec.models.kernels``).
        draft_device: the draft's device (None: ``device``); draft_threads: its torch threads.
        device_map: the target's placement over devices (``auto``, a device, or a dict of module
            → device) and ``max_memory`` its per-device budget, both passed to
            ``from_pretrained`` (``specdec.models.placement``); None: the whole target on
            ``device``.
        static_cache, max_cache_len, cuda_graphs: the decoding caches' kind and their replay
            (``specdec.static_cache``, ``specdec.graphs``).
    """
    # 1. Refuse what cannot run before minutes of loading.
    spec = static_spec(static_cache, max_cache_len, cuda_graphs)
    check_before_loading(device, draft_device=draft_device if draft is not None else None,
                         device_map=device_map, max_memory=max_memory)
    torch_dtype = resolve_dtype(dtype)
    check_attention(attn_implementation, device=device, dtype=torch_dtype)
    kwargs = {"dtype": torch_dtype, "trust_remote_code": trust_remote_code}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    # 2. The tokenizers (the draft's is compared token by token with the target's).
    tok = from_hub(AutoTokenizer, target, "model.target", trust_remote_code=trust_remote_code)
    draft_tok = None
    if draft is not None:
        draft_tok = from_hub(AutoTokenizer, draft, "model.draft",
                             trust_remote_code=trust_remote_code)
    # 3. The target: on `device`, or placed by `device_map` within `max_memory`.
    info = {"target": target, "draft": str(draft)}
    if device_map is None:
        tgt = from_hub(AutoModelForCausalLM, target, "model.target", **kwargs).to(device).eval()
    else:
        placed = {"device_map": _plain(device_map), "max_memory": _plain(max_memory)}
        tgt = from_hub(AutoModelForCausalLM, target, "model.target", **kwargs,
                       **{k: v for k, v in placed.items() if v is not None}).eval()
        check_loaded(tgt)
    # 4. The draft, straight onto its device.
    drf = None
    if draft is not None:
        drf = from_hub(AutoModelForCausalLM, draft, "model.draft", **kwargs)
        drf = drf.to(draft_device or device)
        drf = drf.eval()
    pair = make_pair(name, tgt, drf, tok, info, linear_kernel=linear_kernel,
                     draft_device=draft_device, draft_threads=draft_threads,
                     draft_tokenizer=draft_tok, device_map=_plain(device_map))
    return with_static(pair, spec)


def _plain(value: object) -> object:
    """A Hydra ``DictConfig`` as a plain dict (accelerate checks ``isinstance(..., dict)``)."""
    if value is None or isinstance(value, str | int):
        return value
    from omegaconf import DictConfig, OmegaConf

    return OmegaConf.to_container(value) if isinstance(value, DictConfig) else dict(value)


def with_static(pair: ModelPair, spec: StaticSpec | None) -> ModelPair:
    """``pair`` with its caches' kind; a static one is recorded in the fingerprint
    (``static_cache``: the slots, or ``positions``; ``cuda_graphs``: ``on`` when the bucketed
    forwards are replayed, ``model.cuda_graphs`` null meaning on CUDA), as it changes timings."""
    if spec is None:
        return replace(pair, static_cache=None)
    graphs = spec.cuda_graphs  # None (auto): each CachedLM's is on when its model is on CUDA
    if graphs is None:
        graphs = next(pair.target.parameters()).device.type == "cuda"
    info = {**pair.info, "static_cache": str(spec.max_cache_len or "positions")}
    if graphs:
        info["cuda_graphs"] = "on"
    return replace(pair, static_cache=spec, info=info)
