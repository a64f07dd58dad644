"""A static (preallocated, fixed-shape) KV cache behind ``lm.CachedLM``, with bucketed forwards.

``model.static_cache: true`` makes ``CachedLM`` keep its keys and values in transformers'
``StaticCache``: every layer holds ``[1, heads, L, head_dim]`` tensors (``L`` slots), allocated
once per size and written in place, and a forward of ``N`` new nodes is padded to the next
*bucket* (``1, 2, 4, ..., BUCKET_CAP``) so that each bucket always calls the model with the same
shapes: ids ``[1, B]``, positions ``[1, B]``, an explicit additive attention mask ``[1, 1, B, L]``
over every cache slot. Those fixed shapes and fixed cache addresses are what a CUDA-graph capture
of the decode step needs (``specdec.graphs``, ``model.cuda_graphs``). A forward of more than
``BUCKET_CAP`` nodes (a prompt's prefill) runs unpadded, the eager fallback. The mask and
positions are built on the model's device (a captured step copies them into its static buffers
without a host round trip beyond the small ``[B, before + B]`` block).

Exactness: padding rows sit after the real ones and no real row sees them (nor any stale slot
past the cache's length), so each real row's attention is the dynamic path's plus exactly-zero
weights; the padding's cache slots are cropped off after the forward. In float64 the logits
match the dynamic path's to rounding (``tests/core/test_static_cache.py``), and greedy decoding is
token-identical for every method preset.

``max_cache_len`` (``model.max_cache_len``) ``None`` sizes the cache to what is used: it starts
at ``START_LEN`` slots and *grows* by doubling when a forward would not fit (``StaticKV.grow``:
a bigger ``StaticCache``, each layer's rows ``[0, length)`` and its length copied over, counted
as ``cache_grows``; the graph runner drops its entries and recaptures), never past the model's
positions (``max_position_embeddings``) plus ``BUCKET_CAP`` slots for drafted nodes. A decode
step then attends over a few hundred slots, not over all 8k of SmolLM2's positions. An integer
``max_cache_len`` is a fixed size that never grows. A forward that would pass the limit raises
``BadInput`` naming the key (the eval's context check knows positions only).
Only ``CachedLM`` (and its graph runner) use this module: they alone touch KV-cache internals.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch
from transformers import Cache, PreTrainedModel, StaticCache
from transformers.cache_utils import StaticLayer

from specdec.errors import BadInput
from specdec.trees import ancestor_mask, depths, is_chain

BUCKET_CAP = 64  # the largest padded forward (a tree of up to 64 nodes); above it: unpadded
START_LEN = 256  # a growing cache's first size (``max_cache_len: null``), doubled as needed
GROWS = "cache_grows"  # the counter of growths (``StaticKV.counts``, a generation's counters)


@dataclass(frozen=True)
class StaticSpec:
    """A pair's choice of the static cache (``ModelPair.static_cache``; ``None`` there: dynamic).

    ``max_cache_len``: the slots of each model's cache (``None``: sized to what is used, growing
    up to each model's positions plus ``BUCKET_CAP``).
    ``cuda_graphs``: replay the bucketed forwards through ``specdec.graphs.GraphRunner``
    (``None``: on for a model on CUDA, off elsewhere; ``True`` on CPU runs the runner's
    fixed-address path without a capture).
    """

    max_cache_len: int | None = None
    cuda_graphs: bool | None = None


def static_spec(
    static_cache: bool, max_cache_len: int | None, cuda_graphs: bool | None = None
) -> StaticSpec | None:
    """The config keys ``model.static_cache`` / ``model.max_cache_len`` / ``model.cuda_graphs``
    as a ``StaticSpec`` (``None`` for the dynamic cache), checked before any weights load."""
    if cuda_graphs is not None and not isinstance(cuda_graphs, bool):
        raise BadInput(f"model.cuda_graphs must be true, false or null (auto), got {cuda_graphs!r}")
    if cuda_graphs and static_cache is False:
        raise BadInput(
            "model.cuda_graphs=true needs model.static_cache=true (graphs replay the "
            "static cache's fixed-shape forwards): set both, or cuda_graphs=null"
        )
    if not isinstance(static_cache, bool):
        raise BadInput(f"model.static_cache must be true or false, got {static_cache!r}")
    if max_cache_len is not None and (
        isinstance(max_cache_len, bool) or not isinstance(max_cache_len, int) or max_cache_len < 1
    ):
        raise BadInput(
            f"model.max_cache_len must be a whole number >= 1 or null, got {max_cache_len!r}"
        )
    return StaticSpec(max_cache_len, cuda_graphs) if static_cache else None


def bucket(n: int, cap: int = BUCKET_CAP) -> int:
    """The padded size of a forward of ``n`` nodes: the next power of two up to ``cap``, else
    ``n`` itself (the eager fallback)."""
    if n > cap:
        return n
    size = 1
    while size < n:
        size *= 2
    return size


def cache_length(model: PreTrainedModel, max_cache_len: int | None) -> int:
    """The most slots the static cache may hold: ``max_cache_len`` (a fixed size), or when
    ``None`` the model's positions plus ``BUCKET_CAP`` (the eval fits prompt + new tokens in the
    positions; drafted nodes pending past the last committed token take up to a bucket more), the
    limit a growing cache (``StaticKV``) doubles up to."""
    if max_cache_len is None:
        positions = getattr(model.config, "max_position_embeddings", None)
        if positions is None:
            raise BadInput(
                "model.static_cache=true needs model.max_cache_len: this model's "
                "config has no max_position_embeddings to default to"
            )
        return int(positions) + BUCKET_CAP
    static_spec(True, int(max_cache_len))  # refuses a length < 1
    return int(max_cache_len)


class StaticKV:
    """The static cache of one ``CachedLM`` and the padded, fixed-shape inputs of its forwards.

    ``CachedLM`` still crops and gathers through the cache's layers (``crop(-k)`` moves a layer's
    write position back; kept rows are copied into place), exactly as with ``DynamicCache``.
    ``max_len``: the slots of ``cache`` now; ``limit``: the most it may grow to (``max_len``
    itself for an integer ``max_cache_len``). A growth replaces ``cache``: holders re-read it.
    """

    def __init__(
        self, model: PreTrainedModel, max_cache_len: int | None = None, cap: int = BUCKET_CAP
    ):
        self.limit = cache_length(model, max_cache_len)
        self.growing = max_cache_len is None
        self.max_len = min(START_LEN, self.limit) if self.growing else self.limit
        self.cap, self.config = cap, model.config
        self.dtype = model.dtype
        self.counts: Counter[str] = Counter()  # GROWS
        self.cache = StaticCache(config=model.config, max_cache_len=self.max_len)
        kinds = {type(layer).__name__ for layer in self.cache.layers}
        if kinds != {StaticLayer.__name__}:
            raise BadInput(
                f"model.static_cache=true supports full-attention layers only; this "
                f"model's cache has {sorted(kinds)}: set model.static_cache=false"
            )
        self.padding = 0  # padding nodes of the forward in flight, cropped by `trim`

    def reset(self, length: int) -> None:
        """Empty the cache in place (its tensors keep their addresses for a graph capture)."""
        drop_last(self.cache, length)

    def inputs(self, kwargs: dict, parents: list[int], prefix: int, before: int) -> dict:
        """The padded model inputs of ``N`` new nodes after ``prefix`` cached and ``before``
        pending ones; ``parents`` run over every pending node, old and new; ``kwargs`` holds the
        unpadded ``input_ids [1, N]`` or ``inputs_embeds [1, N, H]``."""
        first = prefix + before
        n = len(parents) - before
        if first + n > self.limit:
            raise BadInput(
                f"the static KV cache holds at most {self.limit} tokens but this forward needs "
                f"{first + n}: raise model.max_cache_len (null: the model's positions + "
                f"{BUCKET_CAP})"
            )
        size = bucket(n, self.cap)
        if first + size > self.limit:
            size = n  # no room for the padding at the end of the cache: run unpadded
        if first + size > self.max_len:
            self.grow(first + size, first)
        self.padding = pad = size - n
        device = next(iter(kwargs.values())).device
        out = {}
        if "input_ids" in kwargs:
            ids = kwargs["input_ids"]  # [1, N]
            out["input_ids"] = torch.cat([ids, ids.new_zeros(1, pad)], 1)  # [1, B]
        else:
            embeds = kwargs["inputs_embeds"]  # [1, N, H]
            out["inputs_embeds"] = torch.cat(
                [embeds, embeds.new_zeros(1, pad, embeds.shape[2])], 1
            )  # [1, B, H]
        # 1. Real rows see the prefix and their pending ancestors; padding rows see themselves.
        chain = before == 0 and is_chain(parents)
        allowed = torch.zeros(size, before + size, dtype=torch.bool)  # [B, before + B]
        if chain:  # causal, without ancestor_mask's O(N^2) Python loop (a long prefill)
            allowed[:n, :n] = torch.ones(n, n, dtype=torch.bool).tril()
        else:
            allowed[:n, : before + n] = ancestor_mask(parents)[before:]
        allowed[range(n, size), range(before + n, before + size)] = True
        # the mask is built where the model runs: only the small block crosses from the host
        mask = torch.full(
            (1, 1, size, self.max_len), torch.finfo(self.dtype).min, dtype=self.dtype, device=device
        )  # [1, 1, B, L]
        mask[0, 0, :, :prefix] = 0
        mask[0, 0, :, prefix : first + size].masked_fill_(allowed.to(device), 0)
        # 2. Positions: prefix + depth (a chain: first, first + 1, ...); padding: ``first``.
        real = (
            torch.arange(first, first + n)
            if chain
            else torch.tensor(depths(parents)[before:], dtype=torch.long) + prefix
        )  # [N]
        positions = torch.cat([real, torch.full((pad,), first)])[None]  # [1, B]
        return out | {"attention_mask": mask, "position_ids": positions.to(device)}

    def grow(self, needed: int, length: int) -> None:
        """Replace the cache by one of ``needed`` slots or more (doubling, up to ``limit``) that
        holds the same ``length`` cached tokens: each layer's rows ``[0, length)`` and its
        device-side length are copied (no host sync). Every captured graph and static buffer
        made over the old tensors is stale: ``GraphRunner`` sees the new ``cache`` and recaptures.
        """
        assert self.growing and needed <= self.limit, (needed, self.limit)
        size = self.max_len
        while size < needed:
            size *= 2
        size = min(size, self.limit)
        new = StaticCache(config=self.config, max_cache_len=size)
        with torch.inference_mode():  # lengths and rows a forward wrote are inference tensors
            for old, layer in zip(self.cache.layers, new.layers):
                if not old.is_initialized:  # nothing cached yet: allocated by the next forward
                    continue
                layer.lazy_initialization(old.keys[..., :0, :], old.values[..., :0, :])
                layer.keys[..., :length, :] = old.keys[..., :length, :]
                layer.values[..., :length, :] = old.values[..., :length, :]
                layer.cumulative_length.copy_(old.cumulative_length)
        self.cache, self.max_len = new, size
        self.counts[GROWS] += 1

    def trim(self) -> None:
        """Crop the padding of the last forward off the cache (its slots stay, masked)."""
        if self.padding:
            drop_last(self.cache, self.padding)
            self.padding = 0


def drop_last(cache: Cache, count: int) -> None:
    """Remove the last ``count`` cached tokens of every layer, in place (a static layer only moves
    its write position back: its tensors keep their addresses for a graph capture).

    Each layer's ``crop(-count)`` does this on transformers releases whose ``StaticLayer`` has it;
    older 5.x releases (5.17, the GPU image's) have none, so the static layer's device-side
    ``cumulative_length`` is moved back here, as their ``update`` advances it (``add_``). Inside
    ``inference_mode``: a length first written by a forward under it is an inference tensor, and
    a crop between generations runs outside it (an H200 run raised "Inplace update to inference
    tensor outside InferenceMode" on a graph-captured cache). The static layers' lengths move
    in one ``_foreach_sub_`` per device: one kernel, not one per layer (30 for SmolLM2), per crop.
    """
    if count <= 0:
        return
    lengths: dict[torch.device, list[torch.Tensor]] = {}  # static layers' lengths, per device
    with torch.inference_mode():
        for layer in cache.layers:  # what ``Cache.crop`` does, where the layers have ``crop``
            length = getattr(layer, "cumulative_length", None)
            if hasattr(layer, "crop") and type(layer) is not StaticLayer:
                layer.crop(-count)
            elif isinstance(length, torch.Tensor):  # a static layer's crop: batched below
                if layer.is_initialized:
                    lengths.setdefault(length.device, []).append(length)
            else:
                import transformers

                raise BadInput(
                    f"transformers {transformers.__version__}'s "
                    f"{type(layer).__name__} cannot be cropped; install a transformers "
                    "release the project supports (pyproject.toml) or set "
                    "model.static_cache=false"
                )
        for same_device in lengths.values():  # one kernel per device, not one per layer
            torch._foreach_sub_(same_device, count)


def gather_nodes(cache: Cache, device: torch.device, prefix: int, nodes: list[int]) -> None:
    """``CachedLM.keep``'s tree gather: copy the cache rows of pending ``nodes`` (indices after
    ``prefix`` cached tokens) to ``prefix, prefix + 1, ...`` along the sequence axis of every
    layer's keys and values, in place on a dynamic or a static cache (whose tensor addresses a
    captured CUDA graph relies on)."""
    index = {device: torch.tensor([prefix + i for i in nodes], device=device)}  # [K]
    for layer in cache.layers:  # a device_map target's layers live on several devices
        if (at := index.get(layer.keys.device)) is None:
            at = index[layer.keys.device] = index[device].to(layer.keys.device)
        layer.keys[..., prefix : prefix + len(nodes), :] = layer.keys[..., at, :]
        layer.values[..., prefix : prefix + len(nodes), :] = layer.values[..., at, :]
