"""Any Hugging Face pair (``model=hf``): a target and an optional draft by hub id or local folder.

``hf_pair`` is ``load_pair`` with the two conveniences a command line needs: ``draft=none`` (the
string Hydra passes for ``model.draft=none``) means no draft, and the pair's name defaults to the
target's reference (a hub id as written, a local folder's name). ``check_reference`` tells,
before any weights load, whether a reference can load at all: a local folder needs what
``save_pretrained`` writes (``check_folder``: ``config.json``, a weights file whose safetensors
header covers the file, the tokenizer's files); a hub id must be a valid repository name, and
when the hub is offline (``HF_HUB_OFFLINE=1``) its ``config.json`` must be in the local Hugging
Face cache. A folder that still fails to load, or loads weights that are NaN or infinite
(``check_finite``), is refused naming the folder, not with the loader's traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors import SafetensorError

from specdec.errors import BadInput, InputError, MissingInput
from specdec.models.pair import ModelPair, load_pair
from specdec.models.placement import Placement

NO_DRAFT = ("", "none", "null")  # model.draft values meaning "no draft" (case-insensitive)
WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)  # what save_pretrained writes (one of them)
TOKENIZER = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model")
SAVE_FIX = (
    "write it again with model.save_pretrained(folder) and "
    "tokenizer.save_pretrained(folder), or give a hub id"
)


def no_draft(draft: object) -> bool:
    """Whether a ``model.draft`` value asks for no draft model (``null``, ``none``)."""
    return draft is None or (isinstance(draft, str) and draft.strip().lower() in NO_DRAFT)


def pair_name(target: str) -> str:
    """The default name of a pair: a hub id as written, a local folder's own name."""
    path = Path(target).expanduser()
    return path.resolve().name if path.exists() else str(target)


def hub_offline() -> bool:
    """Whether downloads are switched off (``HF_HUB_OFFLINE`` / ``TRANSFORMERS_OFFLINE``), read
    now rather than when ``huggingface_hub`` was imported."""
    flags = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("TRANSFORMERS_OFFLINE", ""))
    return any(f.strip().upper() in ("1", "ON", "YES", "TRUE") for f in flags)


def looks_like_hub_id(text: str) -> bool:
    """``org/name`` that is no path here: one slash, no empty or hidden part, not ``.``/``/``/``~``
    rooted (a hub id to resolve from the cache, not a folder)."""
    return (
        text.count("/") == 1
        and not text.startswith((".", "/", "~"))
        and all(part and not part.startswith(".") for part in text.split("/"))
        and not Path(text).expanduser().exists()
    )


def check_reference(ref: str, key: str) -> None:
    """Refuse a model reference that cannot load, naming ``key`` and the fix; no weights load.

    Args:
        ref: a local folder or a hub id (``org/name``).
        key: the config key that gave it (``model.target``).

    Raises:
        BadInput: a local folder without ``config.json``, or neither a folder nor a hub id.
        MissingInput: a hub id that is not cached while the hub is offline.
    """
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    path = Path(ref).expanduser()
    if path.is_dir():
        check_folder(path, key)
        return
    if ref.startswith((".", "/", "~")) or ref.count("/") > 1 or path.exists():
        raise BadInput(
            f"{key}={ref}: no model folder there; give an existing folder written by "
            "save_pretrained, or a hub id like org/name"
        )
    try:
        validate_repo_id(ref)
    except HFValidationError as err:
        raise BadInput(
            f"{key}={ref} is neither a local model folder nor a Hugging Face hub id "
            f"({err}); give an existing folder or an id like org/name"
        ) from None
    if hub_offline() and not isinstance(try_to_load_from_cache(ref, "config.json"), str):
        raise MissingInput(
            f"{key}={ref} is not in the local Hugging Face cache and HF_HUB_OFFLINE=1 forbids "
            f"downloading it; fetch it once with `hf download {ref}` (network needed), or give a "
            f"local folder: {key}=<path>"
        )


def check_safetensors(file: Path, key: str) -> None:
    """A safetensors file whose header parses and whose tensors end where the file ends (a copy
    cut short, or a file still downloading, fails here); reads the header only."""
    size = file.stat().st_size
    try:
        with file.open("rb") as f:
            length = int.from_bytes(f.read(8), "little")
            if not 0 < length <= size - 8:
                raise ValueError(f"header length {length} does not fit in {size} bytes")
            header = json.loads(f.read(length))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (ValueError, KeyError, TypeError, IndexError) as err:
        raise BadInput(
            f"{key}: the weights file {file} is not a readable safetensors file ({err}); {SAVE_FIX}"
        ) from None
    if 8 + length + max(ends, default=0) != size:
        raise BadInput(
            f"{key}: the weights file {file} is truncated or padded ({size} bytes, its "
            f"header describes {8 + length + max(ends, default=0)}); {SAVE_FIX}"
        )


def check_folder(path: Path, key: str) -> None:
    """Refuse a local model folder that lacks what ``save_pretrained`` writes, naming it.

    Raises:
        BadInput: no ``config.json``, no weights file, a truncated safetensors file, or no
            tokenizer file (the pair reads the tokenizer from each folder).
    """
    if not (path / "config.json").is_file():
        raise BadInput(
            f"{key}={path} is a folder without config.json, not a saved model; give "
            "a folder written by save_pretrained, or a hub id"
        )
    if not any((path / name).is_file() for name in WEIGHTS):
        raise BadInput(f"{key}={path} holds no weights file ({' or '.join(WEIGHTS)}); {SAVE_FIX}")
    for file in sorted(path.glob("*.safetensors")):
        check_safetensors(file, key)
    if not any((path / name).is_file() for name in TOKENIZER):
        raise BadInput(
            f"{key}={path} holds no tokenizer ({' or '.join(TOKENIZER)}); save the "
            "tokenizer into it with tokenizer.save_pretrained(folder), or give a "
            "hub id"
        )


def check_finite(model: torch.nn.Module, key: str, ref: str) -> None:
    """Refuse loaded weights that hold NaN or infinity, naming the reference and the tensor."""
    for name, param in model.named_parameters():
        if not bool(torch.isfinite(param).all()):
            raise BadInput(
                f"{key}={ref}: the weight {name} holds NaN or infinite values (a "
                "corrupt file, or a model that diverged in training); load another "
                f"copy, or {SAVE_FIX}"
            )


def _not_loading(refs: dict[str, str | None], err: Exception) -> None:
    """A local folder that passed ``check_folder`` but still fails to load (the loader's error
    does not say which file): name the local folders of the pair; hub ids keep the error."""
    folders = [
        f"{key}={ref}"
        for key, ref in refs.items()
        if ref is not None and Path(ref).expanduser().is_dir()
    ]
    if isinstance(err, InputError) or not folders:
        return
    reason = " ".join(str(err).split())[:300] or type(err).__name__
    raise BadInput(
        f"{' or '.join(folders)}: the folder does not load ({type(err).__name__}: "
        f"{reason}); {SAVE_FIX}"
    ) from err


def hf_pair(
    target: str,
    draft: str | None = None,
    *,
    name: str | None = None,
    placement: Placement | Mapping | None = None,
    trust_remote_code: bool = False,
    static_cache: bool = False,
    max_cache_len: int | None = None,
    cuda_graphs: bool | None = None,
) -> ModelPair:
    """Load a target and an optional draft by hub id or local folder (``conf/model/hf.yaml``).

    Args:
        target: hub id or local folder of the target.
        draft: hub id or local folder of the draft; ``None`` / ``"none"``: no draft (AR and the
            draft-free methods only).
        name: the pair's name in summaries (default: ``pair_name(target)``).
        placement: the model config's ``placement:`` node (``Placement.from_config``).
        The other arguments are ``specdec.models.pair.load_pair``'s.
    """
    check_reference(str(target), "model.target")
    draft = None if no_draft(draft) else str(draft)
    if draft is not None:
        check_reference(draft, "model.draft")
    try:
        pair = load_pair(
            name or pair_name(str(target)),
            str(target),
            draft,
            placement=placement,
            trust_remote_code=trust_remote_code,
            static_cache=static_cache,
            max_cache_len=max_cache_len,
            cuda_graphs=cuda_graphs,
        )
    except (OSError, SafetensorError, ValueError) as err:  # a file the loader cannot read
        _not_loading({"model.target": str(target), "model.draft": draft}, err)
        raise
    check_finite(pair.target, "model.target", str(target))
    if pair.draft is not None:
        check_finite(pair.draft, "model.draft", str(draft))
    return pair
