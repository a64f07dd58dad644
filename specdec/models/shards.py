"""Sharded weights in the Hugging Face layout, for files that must stay under a size limit.

A shipped folder (``shipped.py``) holds its weights in ``model.safetensors``, or, when written
with a shard limit (``export.max_shard_mib``) and larger than it, in ``model-0000k-of-0000n
.safetensors`` files plus ``model.safetensors.index.json`` (``{"metadata": {"total_size": bytes},
"weight_map": {tensor: shard file}}``), the layout ``transformers`` writes and reads. Lossless,
unlike int8 storage: a transport limit (a GPU machine returns files of at most 16 MiB) need not
change a weight. ``shipped.read_tensors`` reads either layout.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from specdec.errors import BadInput

INDEX = "model.safetensors.index.json"
HEADER_ALLOWANCE = 64 * 1024  # bytes kept free in a shard for the header (~150 B per tensor)


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def shard_plan(state: dict[str, torch.Tensor], max_bytes: int) -> list[list[str]]:
    """Tensor names per shard, in ``state``'s order, each shard's tensors under ``max_bytes``
    less the header's room (``HEADER_ALLOWANCE``, or an eighth of a shard smaller than 512 KiB).

    Raises:
        BadInput: a tensor larger than a shard may be (names it and the setting).
    """
    room = max_bytes - header_room(max_bytes)
    shards: list[list[str]] = [[]]
    used = 0
    for name, tensor in state.items():
        size = nbytes(tensor)
        if size > room:
            raise BadInput(
                f"tensor {name!r} takes {size / 2**20:.1f} MiB, more than a shard of "
                f"{max_bytes / 2**20:.1f} MiB holds; raise export.max_shard_mib or "
                f"store it as int8"
            )
        if shards[-1] and used + size > room:
            shards.append([])
            used = 0
        shards[-1].append(name)
        used += size
    return shards


def header_room(max_bytes: int) -> int:
    return min(HEADER_ALLOWANCE, max_bytes // 8)


def shard_name(k: int, n: int) -> str:
    """``model-0000k-of-0000n.safetensors`` (``k`` from 1)."""
    return f"model-{k:05d}-of-{n:05d}.safetensors"


def write_weights(
    folder: Path, state: dict[str, torch.Tensor], weights: str, max_shard_mib: float | None = None
) -> list[Path]:
    """Write ``state`` into ``folder``: one ``weights`` file, or (``max_shard_mib`` given and the
    tensors larger) shards and the index. Returns the files written."""
    limit = None if max_shard_mib is None else int(float(max_shard_mib) * 2**20)
    if limit is None or sum(nbytes(t) for t in state.values()) + header_room(limit) <= limit:
        save_file(state, str(folder / weights))
        return [folder / weights]
    plan = shard_plan(state, limit)
    files, weight_map = [], {}
    for k, names in enumerate(plan, 1):
        name = shard_name(k, len(plan))
        save_file({n: state[n] for n in names}, str(folder / name))
        weight_map.update(dict.fromkeys(names, name))
        files.append(folder / name)
    index = {
        "metadata": {"total_size": sum(nbytes(t) for t in state.values())},
        "weight_map": weight_map,
    }
    (folder / INDEX).write_text(json.dumps(index, indent=2))
    return [*files, folder / INDEX]
