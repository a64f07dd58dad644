"""Reading and writing EAGLE-3 heads in the published layouts (SpecForge / SGLang / vLLM).

Layouts (``layout``), told apart by ``config.json``:

* ``specdec``: ours (``net.save_eagle3``): an ``eagle3`` block.
* ``eagle3_hf``: ``architectures: ["LlamaForCausalLMEagle3"]`` (SpecForge's output, what SGLang
  and vLLM load): a flat Llama config (``hidden_size``, heads, ``vocab_size`` = the target's,
  ``num_hidden_layers: 1``) plus ``draft_vocab_size``, optionally ``target_hidden_size``,
  ``norm_before_residual`` and ``eagle_config: {eagle_aux_hidden_state_layer_ids: [...]}``.
* ``speculators`` (vllm-project/speculators, ``Eagle3SpeculatorConfig``):
  ``speculators_model_type: "eagle3"`` / ``speculators_config``, the Llama config nested in
  ``transformer_layer_config``, ``draft_vocab_size``, ``norm_before_residual``,
  ``target_hidden_size`` and ``eagle_aux_hidden_state_layer_ids`` at the top level.

Tensors (``model.safetensors`` or ``pytorch_model.bin``): ``fc.weight [H, 3H]``,
``midlayer.*`` (``layers.0.*`` in speculators; an optional ``model.`` prefix is dropped),
``norm.weight``, ``lm_head.weight [V_d, H]``, ``d2t [V_d]`` (target id = draft id + ``d2t``),
``t2d [V]`` (bool: the target ids in the draft vocabulary) and, in some heads, a copy of the
target's ``embed_tokens.weight`` (not read: the target's own embedding is used, as vLLM does when
a head ships none). Target layers: ``layer_ids.py`` (the top-level
``eagle_aux_hidden_state_layer_ids`` in vLLM's convention, ``eagle_config``'s in SGLang's /
SpecForge's; ``save_eagle3_hf`` writes both, plus the RoPE keys of both transformers 4 --
``rope_theta``, ``rope_scaling`` -- and 5 -- ``rope_parameters``).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from huggingface_hub import snapshot_download
from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError
from transformers import LlamaConfig

from specdec.errors import BadInput
from specdec.models.hf import looks_like_hub_id
from specdec.models.shipped import (
    CONFIG,
    WEIGHTS,
    check_finite,
    load_state,
    read_tensors,
    write_asset,
)
from specdec.nets.eagle3.layer_ids import (  # noqa: F401  (default_layers: re-exported)
    KEY,
    default_layers,
    engine_keys,
    pinned,
    servable,
)
from specdec.nets.eagle3.published import ARCH, PublishedDecoder, PublishedEagle3Net

FORMATS = ("specdec", "eagle3_hf")  # export.format values
BIN = "pytorch_model.bin"
LOOKED_FOR = (
    "'eagle3' (specdec)",
    f"architectures: [{ARCH!r}] (SpecForge/SGLang/vLLM)",
    "'speculators_config' or speculators_model_type: 'eagle3' (vllm speculators)",
)


def resolve_folder(path: str | Path) -> Path:
    """A local folder, or a hub id (``org/name``) resolved from the local Hugging Face cache.

    Raises:
        BadInput: a hub id that is not cached (offline), naming ``hf download <id>``.
    """
    folder, text = Path(path), str(path)
    if not looks_like_hub_id(text):
        return folder
    try:
        return Path(snapshot_download(text, local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError, OSError) as err:
        raise BadInput(
            f"drafter.path={text} is neither a folder nor a hub id cached offline; "
            f"run `hf download {text}` (or point drafter.path at a folder)"
        ) from err


def layout(raw: dict, folder: Path, fix: str) -> str:
    """``specdec``, ``eagle3_hf`` or ``speculators`` for a head's ``config.json`` dict; ``fix``
    (in backticks) is named when it is none of them."""
    if "eagle3" in raw:
        return "specdec"
    if "speculators_config" in raw or raw.get("speculators_model_type") == "eagle3":
        return "speculators"
    if ARCH in (raw.get("architectures") or []):
        return "eagle3_hf"
    raise BadInput(
        f"EAGLE-3 config {folder / CONFIG} is in an unknown format: it has none of "
        f"{', '.join(LOOKED_FOR)}; re-create it with {fix}"
    )


def _tensors(folder: Path, fix: str) -> dict[str, torch.Tensor]:
    """The head's tensors with published names (``model.`` dropped, ``layers.0.`` ->
    ``midlayer.``); ``model.safetensors`` or else ``pytorch_model.bin``."""
    if (folder / WEIGHTS).exists() or not (folder / BIN).exists():
        state = read_tensors(folder / WEIGHTS, "EAGLE-3 head", fix)
    else:
        try:
            state = torch.load(folder / BIN, map_location="cpu", weights_only=True)
        except (pickle.UnpicklingError, RuntimeError, OSError, EOFError) as err:
            raise BadInput(
                f"EAGLE-3 head weights {folder / BIN} are corrupt ({err}); "
                f"re-download them with {fix}"
            ) from err
        check_finite(state, folder / BIN, "EAGLE-3 head", fix)
    out = {}
    for name, tensor in state.items():
        name = name.removeprefix("model.")
        out["midlayer." + name[len("layers.0.") :] if name.startswith("layers.0.") else name] = (
            tensor
        )
    return out


def _config(
    raw: dict, kind: str, folder: Path, *, read_pins: bool = True
) -> tuple[dict, list[int] | None]:
    """The flat Llama config dict and the pinned target layers as ``hidden_states`` indices
    (``None``: not pinned, or ``read_pins`` false); speculators' key is vLLM's
    (``layer_ids.py``)."""
    if kind == "speculators":
        cfg = dict(raw.get("transformer_layer_config") or {})
        for key in ("draft_vocab_size", "norm_before_residual", "target_hidden_size"):
            if raw.get(key) is not None:
                cfg[key] = raw[key]
        return cfg, [int(i) for i in raw[KEY]] if read_pins and raw.get(KEY) else None
    return dict(raw), pinned(raw, folder) if read_pins else None


def read_published(
    folder: Path,
    raw: dict,
    kind: str,
    *,
    target_layers_count: int | None = None,
    target_layers: list[int] | None = None,
    fix: str = "`hf download <id>`",
) -> PublishedEagle3Net:
    """A ``PublishedEagle3Net`` from a head in the ``eagle3_hf`` / ``speculators`` layout.

    Target layers (``hidden_states`` indices): ``target_layers`` if given, else the ones the
    config pins (each key read in its engine's convention, ``layer_ids.pinned``), else the
    engines' default for a ``target_layers_count``-layer target. Raises ``BadInput`` naming the
    file and key at fault (missing keys, a draft hidden size other than the target's, a broken
    token map, keys pinning different layers for vLLM and SGLang).
    """
    layers = [int(i) for i in target_layers] if target_layers else None
    cfg_dict, pins = _config(raw, kind, folder, read_pins=layers is None)
    where = folder / CONFIG
    lacking = [k for k in ("hidden_size", "vocab_size", "num_attention_heads") if k not in cfg_dict]
    if lacking:
        raise BadInput(f"EAGLE-3 config {where} ({kind}) lacks {lacking}; re-export the head")
    layers = layers or pins
    if layers is None:
        if target_layers_count is None:
            raise BadInput(
                f"EAGLE-3 head {folder} pins no target layers "
                f"(eagle_aux_hidden_state_layer_ids); pass them, e.g. "
                f"drafter.target_layers=[2,<L/2>,<L-3>] (vLLM's default for an "
                f"L-layer target)"
            )
        layers = default_layers(target_layers_count)
    hidden = int(cfg_dict["hidden_size"])
    target_hidden = int(cfg_dict.get("target_hidden_size") or hidden)
    if target_hidden != hidden:
        raise BadInput(
            f"EAGLE-3 head {folder} has hidden size {hidden} but target_hidden_size "
            f"{target_hidden}; specdec feeds the target's embedding to the head, so "
            f"use a head whose hidden size is the target's"
        )
    for key in ("eagle_config", KEY):
        cfg_dict.pop(key, None)
    if cfg_dict.get("layer_types"):  # the one layer's type (a config may list the target's)
        cfg_dict["layer_types"] = cfg_dict["layer_types"][:1]
    cfg = LlamaConfig.from_dict({**cfg_dict, "num_hidden_layers": 1})
    vocab = int(cfg.vocab_size)
    cfg.draft_vocab_size = int(cfg_dict.get("draft_vocab_size") or vocab)
    state = _tensors(folder, fix)
    token_map = _token_map(state, cfg.draft_vocab_size, vocab, folder)
    net = PublishedEagle3Net(PublishedDecoder(cfg), layers, target_hidden)
    wanted = {
        "fc.weight": "fc.weight",
        "norm.weight": "decoder.norm.weight",
        "lm_head.weight": "decoder.lm_head.weight",
    }
    mine = {
        wanted.get(k, "decoder." + k): v
        for k, v in state.items()
        if k in wanted or k.startswith("midlayer.")
    }
    mine["decoder.token_map"] = token_map
    dtype = next(v.dtype for v in mine.values() if v.is_floating_point())
    load_state(net.to(dtype), mine, folder, "EAGLE-3 (published layout)", fix)
    return net.eval()


def _token_map(state: dict, draft_vocab: int, vocab: int, folder: Path) -> torch.Tensor:
    """``[V_d]`` target ids ``arange + d2t``, checked against ``t2d`` when the head has one."""
    d2t, t2d = state.pop("d2t", None), state.pop("t2d", None)
    if d2t is None:
        if draft_vocab != vocab:
            raise BadInput(
                f"EAGLE-3 head {folder} has draft_vocab_size {draft_vocab} < vocab "
                f"{vocab} but no d2t tensor; re-export it with its token map"
            )
        return torch.arange(vocab)
    token_map = torch.arange(d2t.numel()) + d2t.long()  # [V_d]
    bad = (
        d2t.numel() != draft_vocab
        or token_map.min() < 0
        or token_map.max() >= vocab
        or token_map.unique().numel() != draft_vocab
    )
    if not bad and t2d is not None:
        expect = torch.zeros(vocab, dtype=torch.bool)
        expect[token_map] = True
        bad = t2d.numel() != vocab or not torch.equal(t2d.bool(), expect)
    if bad:
        raise BadInput(
            f"EAGLE-3 head {folder}: d2t/t2d do not map {draft_vocab} distinct draft "
            f"tokens into a {vocab}-token vocabulary; re-export it"
        )
    return token_map


def rope_keys(cfg: dict) -> dict:
    """``rope_theta`` and ``rope_scaling`` (what transformers-4 stacks read: SGLang, older vLLM)
    from transformers 5's ``rope_parameters``; ``rope_scaling`` is null for the default RoPE."""
    rope = dict(cfg.get("rope_parameters") or {})
    if "rope_theta" not in rope:
        return {}
    kind = rope.get("rope_type", rope.get("type", "default"))
    scaling = None if kind == "default" else {k: v for k, v in rope.items() if k != "rope_theta"}
    return {"rope_theta": rope["rope_theta"], "rope_scaling": scaling}


def save_eagle3_hf(
    net: PublishedEagle3Net,
    folder: str | Path,
    *,
    dtype: torch.dtype = torch.float32,
    target_layers_count: int | None = None,
    fix: str = "train it with eagle3.target_layers inside 1..L-1",
) -> Path:
    """Write ``net`` in the ``eagle3_hf`` layout (``LlamaForCausalLMEagle3``) atomically, read
    alike by vLLM, SGLang and SpecForge: the target layers under both engines' keys
    (``layer_ids.engine_keys``), RoPE under both transformers' keys (``rope_keys``).

    Raises:
        BadInput: ``net`` is not of the published architecture, or it reads target layers no
            engine can capture (``layer_ids.servable``; ``target_layers_count``: the target's
            ``L``, when known), naming ``fix``.
    """
    if not isinstance(net, PublishedEagle3Net):
        raise BadInput(
            "export.format=eagle3_hf needs a head of the published EAGLE-3 "
            "architecture: train it with learner.arch=eagle3 (specdec's own head "
            "projects [e; g] to H before a stock decoder layer, which the "
            "LlamaForCausalLMEagle3 layout cannot hold), or use export.format=specdec"
        )
    servable(net.target_layers, target_layers_count, fix)
    dec = net.decoder
    vocab, token_map = int(dec.config.vocab_size), dec.token_map.cpu()
    state = {
        "fc.weight": net.fc.weight,
        "norm.weight": dec.norm.weight,
        "lm_head.weight": dec.lm_head.weight,
    }
    state |= {f"midlayer.{k}": v for k, v in dec.midlayer.state_dict().items()}
    state = {k: v.detach().to(dtype).contiguous().cpu() for k, v in state.items()}
    state["d2t"] = token_map - torch.arange(token_map.numel())  # [V_d] int64
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[token_map] = True
    state["t2d"] = t2d  # [V]
    cfg = dec.config.to_dict()
    for key in ("_name_or_path", "layer_types", "dtype", "torch_dtype"):
        cfg.pop(key, None)
    cfg |= {
        "architectures": [ARCH],
        "num_hidden_layers": 1,
        "draft_vocab_size": int(token_map.numel()),
        "target_hidden_size": int(net.meta["target_hidden"]),
        "tie_word_embeddings": False,
        "torch_dtype": str(dtype).removeprefix("torch."),
    }
    cfg |= rope_keys(cfg) | engine_keys(net.target_layers)
    return write_asset(folder, state, cfg)
