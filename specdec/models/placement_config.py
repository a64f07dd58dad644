"""The ``placement:`` node of a model config (``conf/model/*.yaml``): its keys, its values' checks,
the flat keys it replaced, and the flat view the run hashes read.

Every pair preset states where its models live once, in one node::

    placement:
      device: ${oc.select:device,cpu}   # the eval's `device=cuda` places everything
      dtype: float32
      linear_kernel: auto
      draft_device: null
      draft_threads: null

(the hub-loaded pairs add ``attn_implementation``, ``device_map`` and ``max_memory``).
``Placement.from_config`` (``specdec.models.placement``) is the one function that reads it; the
loaders, the eval's checks and ``specdec.train`` all go through it.

The keys used to sit flat in the model config (``model.dtype``, ``model.draft_device``, ...).
``moved`` names the new key for an old one, so ``model.dtype=bfloat16`` on a command line fails
with ``model.dtype is now model.placement.dtype`` (``specdec.cli_check``), as does a model config
that still holds the flat keys. ``flat_model`` is the model config as it was before the node:
the eval's records hash (``specdec.bench.records.config_hash``) and the training folder's hash
(``specdec.learners.resume.train_hash``) read it, and an eval run folder names a placement
override by its flat key (``specdec.bench.rundir.flat_placement``), so a run of the same
settings keeps its hash and its folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields

import torch

from specdec.errors import BadInput

NODE = "placement"
DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}


@dataclass(frozen=True)
class PlacementKeys:
    """The keys of the ``placement:`` node and their defaults (a key a preset leaves out takes
    its default). Comments in ``conf/model/hf.yaml`` say what each does."""

    device: str = "cpu"  # the eval's `device` (the target's device; its inputs' under device_map)
    dtype: str = "float32"
    linear_kernel: str = "auto"
    draft_device: str | None = None  # null: the target's device
    draft_threads: int | None = None  # null: the process's torch threads
    attn_implementation: str | None = None
    device_map: str | int | dict | None = None
    max_memory: dict | None = None


KEYS: tuple[str, ...] = tuple(f.name for f in fields(PlacementKeys))
DEFAULTS: dict[str, object] = {
    f.name: f.default for f in fields(PlacementKeys) if f.default is not MISSING
}


def key_name(key: str) -> str:
    """How errors name a placement key: ``device`` is the eval's own key (``device=cuda`` sets
    the node's device), the others ``model.placement.<key>``."""
    return "device" if key == "device" else f"model.{NODE}.{key}"


def moved(key: str) -> str | None:
    """The new name of a flat model key the node replaced (``model.dtype`` ->
    ``model.placement.dtype``), else None."""
    parts = key.lstrip("+~").split(".")
    if len(parts) == 2 and parts[0] == "model" and parts[1] in KEYS:
        return f"model.{NODE}.{parts[1]}"
    return None


def moved_error(key: str, value: object = None) -> BadInput:
    """The error for a flat placement key: where it moved, and the override to write."""
    new = moved(key) or key
    flat = key.lstrip("+~")
    what = f"{new}={value}" if value is not None else f"{new}=<value>"
    also = " (device=<d> still sets the target's device)" if flat == "model.device" else ""
    return BadInput(
        f"{flat} is now {new}: the placement keys live in the model config's "
        f"`placement:` node (specdec/models/placement_config.py); write {what}{also}"
    )


def plain(value: object, *, resolve: bool = True) -> object:
    """An OmegaConf node as plain dicts and lists (accelerate checks ``isinstance(..., dict)``)."""
    from omegaconf import OmegaConf

    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=resolve)
    if isinstance(value, Mapping):
        return {k: plain(v, resolve=resolve) for k, v in value.items()}
    return value


def is_model_config(config: Mapping) -> bool:
    """Whether ``config`` is a whole model config (it names its loader or holds the node), not
    the ``placement:`` node itself (what Hydra hands a loader)."""
    return "_target_" in config or NODE in config


def node_of(config: Mapping | None) -> dict[str, object]:
    """The placement node's values, every key present (defaults filled in).

    Args:
        config: a model config (its ``placement:`` node is read) or the node itself; None: the
            defaults (everything on the CPU in float32).

    Raises:
        BadInput: a flat placement key in a model config (naming its new key), or a key the node
            does not have.
    """
    if config is None:
        return dict(DEFAULTS)
    if is_model_config(config):
        flat = [k for k in KEYS if k in config]
        if flat:
            raise moved_error(f"model.{flat[0]}")
        node = config.get(NODE) or {}
    else:
        node = config
    values = plain(node)
    unknown = sorted(str(k) for k in values if k not in KEYS)
    if unknown:
        raise BadInput(
            f"model.{NODE}.{unknown[0]} is not a placement key; the node's keys are "
            f"{', '.join(KEYS)}"
        )
    return {**DEFAULTS, **values}


def parse_device(value: object, key: str) -> torch.device:
    """``value`` as a torch device (whether this machine has it is ``check_before_loading``'s)."""
    try:
        return torch.device(value)
    except (RuntimeError, TypeError) as err:
        raise BadInput(
            f"{key_name(key)}={value!r} is not a torch device (cpu, cuda, cuda:1, mps): {err}"
        ) from None


def resolve_dtype(name: object, key: str = "dtype") -> torch.dtype:
    """The torch dtype a ``dtype`` value names."""
    if name not in DTYPES:
        raise BadInput(f"{key_name(key)}={name!r} is not known; use one of {', '.join(DTYPES)}")
    return DTYPES[str(name)]


def check_values(node: Mapping[str, object]) -> None:
    """Refuse an unknown linear kernel and draft threads that are not a positive integer."""
    from specdec.models.kernels import KERNELS

    kernel = node.get("linear_kernel")
    if kernel not in KERNELS:
        raise BadInput(
            f"{key_name('linear_kernel')}={kernel!r} is not a kernel; use one of "
            f"{', '.join(KERNELS)} (specdec/models/kernels.py)"
        )
    threads = node.get("draft_threads")
    if threads is not None and (
        isinstance(threads, bool) or not isinstance(threads, int) or threads < 1
    ):
        raise BadInput(
            f"{key_name('draft_threads')} must be an integer >= 1 or null, got {threads!r}"
        )


def refuse_split(placement: object, pair: str) -> None:
    """Refuse, for a pair built in this process (``tiny``, ``smollm2``), a ``Placement`` asking
    for what only ``from_pretrained`` honours (``attn_implementation``, ``device_map``,
    ``max_memory``)."""
    asked = {
        "attn_implementation": placement.attention,
        "device_map": placement.device_map,
        "max_memory": placement.max_memory,
    }
    for key, value in asked.items():
        if value is not None:
            raise BadInput(
                f"{key_name(key)}={value} is for pairs loaded with from_pretrained "
                f"(model=hf and the hub presets); model={pair} builds its models in "
                "this process: leave it null"
            )


def flat_model(model: object) -> object:
    """A model config with its ``placement:`` node's keys back at the top, as the config was
    before the node (what the run hashes read); anything else is returned as it is."""
    if not isinstance(model, Mapping) or not isinstance(model.get(NODE), Mapping):
        return model
    return {**{k: v for k, v in model.items() if k != NODE}, **model[NODE]}
