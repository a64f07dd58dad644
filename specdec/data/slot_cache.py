"""A preallocated, row-droppable KV cache for batched trace generation (``data.batch_decode``).

Every layer's keys and values live in one ``[B, H_kv, S, D]`` tensor allocated once (``S`` = the
batch's widest prompt plus the new tokens), written in place at the shared write position
``length``; a forward gets views up to the written slots, so no step copies the cache (a
``DynamicCache`` concatenates it on every token). ``rows`` limits writes to a slice of the batch
(the prefill runs in groups of rows); ``keep`` drops finished rows (one gather of the cache).
Which slots of a row hold real tokens (not left padding) is the caller's mask, not the cache's.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, CacheLayerMixin


class _SlotLayer(CacheLayerMixin):
    """One layer's view of a ``SlotKV`` (what the model's attention calls ``update`` on)."""

    is_compileable = False
    is_sliding = False

    def __init__(self, store: SlotKV, index: int) -> None:
        super().__init__()
        self.store, self.index = store, index
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        return None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.store.write(self.index, key_states, value_states)

    def get_seq_length(self) -> int:
        return self.store.length

    def get_max_length(self) -> int:
        return self.store.slots

    def get_mask_sizes(self, query_length: int, *args) -> tuple[int, int]:
        return self.store.length + query_length, 0


class SlotKV(Cache):
    """Keys and values ``[B, H_kv, S, D]`` per layer, one write position for all rows.

    Args:
        layers: decoder layers of the model; heads, head_dim: its key/value heads and their size.
        rows: the batch; slots: ``S``, the positions each row can hold.
    """

    def __init__(
        self,
        *,
        layers: int,
        heads: int,
        head_dim: int,
        rows: int,
        slots: int,
        dtype: torch.dtype,
        device: torch.device | str = "cpu",
    ) -> None:
        shape = (rows, heads, slots, head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        super().__init__(layers=[_SlotLayer(self, i) for i in range(layers)])
        self.slots, self.length, self.rows = slots, 0, slice(None)

    @classmethod
    def for_model(cls, model: torch.nn.Module, rows: int, slots: int) -> SlotKV:
        """A cache shaped for ``model`` (a transformers decoder: its config's head counts)."""
        cfg = model.config
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        p = next(model.parameters())
        return cls(
            layers=cfg.num_hidden_layers,
            heads=heads,
            head_dim=head_dim,
            rows=rows,
            slots=slots,
            dtype=p.dtype,
            device=p.device,
        )

    def write(
        self, index: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store ``k, v [b, H_kv, n, D]`` at slots ``length .. length + n`` of ``rows``; returns
        every slot up to there (``[b, H_kv, length + n, D]`` views)."""
        end = self.length + k.shape[2]
        keys, values = self.keys[index][self.rows], self.values[index][self.rows]
        keys[:, :, self.length : end] = k
        values[:, :, self.length : end] = v
        return keys[:, :, :end], values[:, :, :end]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only batch rows ``rows`` (``[b']`` indices, in that order)."""
        self.keys = [k.index_select(0, rows) for k in self.keys]
        self.values = [v.index_select(0, rows) for v in self.values]
