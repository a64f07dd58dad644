"""CachedLM: a transformers causal LM plus its KV cache, appended to and pruned by node index.

This is the **only** module that touches ``past_key_values`` / ``DynamicCache`` (ARCHITECTURE B6).
API: ``reset()``, ``ids`` (the cached token ids), ``forward(tokens, parent)`` appends N nodes after
the cached prefix and returns their logits, ``keep(nodes)`` retains some of the nodes appended by
the last forward (in order) and drops the rest, ``crop(length)`` truncates the cached prefix.

Trees use an explicit 4-D additive attention mask (prefix fully visible, plus the ancestor matrix of
``parent``) and position ids ``prefix_len + depth``; chains use the model's causal path.

Every forward is appended to ``forward_log`` as
``ForwardRecord(role, new_tokens, context, seconds)``
so that the cost model can turn a run's log into modelled time (ARCHITECTURE §0.2).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

from specdec.core import LMOut


@dataclass(frozen=True)
class ForwardRecord:
    """One model forward: which model, how many new tokens, the cached context before it, time."""

    role: str
    new_tokens: int
    context: int
    seconds: float


class CachedLM:
    """A causal LM with a KV cache holding a committed prefix of token ids.

    Args:
        model: a transformers causal LM (batch size 1 is asserted).
        role: ``"target"`` or ``"draft"`` (used in the forward log).
        synchronize: call ``torch.cuda.synchronize()`` around forwards for per-forward timing
            (only for profiling; CPU timing needs none).
    """

    def __init__(self, model: PreTrainedModel, role: str = "target", *, synchronize: bool = False):
        self.model = model.eval()
        self.role = role
        self.synchronize = synchronize
        self.vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self.device = next(model.parameters()).device
        self.forward_log: list[ForwardRecord] = []
        self._ids: list[int] = []
        self._pending: list[int] = []  # ids appended by the last forward, not yet kept
        self._pending_chain = True
        self._cache = DynamicCache(config=model.config)

    # --- state ----------------------------------------------------------------------------------
    @property
    def ids(self) -> list[int]:
        """Token ids held in the cache: the committed prefix plus pending *chain* nodes."""
        return self._ids + self._pending if self._pending_chain else self._ids

    def reset(self) -> None:
        """Empty the cache."""
        self._ids, self._pending, self._pending_chain = [], [], True
        self._cache = DynamicCache(config=self.model.config)

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` tokens (pending chain nodes count as committed, pending
        tree nodes are dropped)."""
        if self._pending_chain:
            self._commit_pending_chain()
        self._drop_pending()
        assert 0 <= length <= len(self._ids), (length, len(self._ids))
        remove = len(self._ids) - length
        if remove:
            self._cache.crop(-remove)
            self._ids = self._ids[:length]

    # --- forward / keep -------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(
        self, tokens: torch.Tensor, parent: torch.Tensor | None = None, *, want_hidden: bool = False
    ) -> LMOut:
        """Append ``tokens`` after the committed prefix and return their logits.

        Args:
            tokens: ``[N]`` token ids (a chain, or a tree described by ``parent``).
            parent: ``[N]`` parent index per node (``-1`` for nodes whose parent is the prefix), or
                ``None`` for a chain.
            want_hidden: also return the last layer's hidden states.

        Returns:
            ``LMOut(logits [N, V], hidden [N, H] | None)``. The nodes stay *pending* until
            ``keep``; pending chain nodes are committed by the next ``forward`` or ``crop`` (the
            drafting loop), pending tree nodes must be resolved with ``keep`` first.
        """
        assert tokens.dim() == 1, "batch size 1: pass a 1-D tensor of token ids"
        self._commit_pending_chain()
        n, prefix = int(tokens.shape[0]), len(self._ids)
        ids = tokens.to(self.device).view(1, n)  # [1, N]
        kwargs: dict = {}
        if parent is not None and not _is_chain(parent):
            kwargs.update(self._tree_inputs(parent, prefix))
        else:
            kwargs["position_ids"] = torch.arange(prefix, prefix + n, device=self.device)[None]
        start = self._clock()
        out = self.model(
            input_ids=ids,
            past_key_values=self._cache,
            use_cache=True,
            output_hidden_states=want_hidden,
            **kwargs,
        )
        seconds = self._clock() - start
        self.forward_log.append(ForwardRecord(self.role, n, prefix, seconds))
        self._pending = [int(t) for t in tokens.tolist()]
        self._pending_chain = "attention_mask" not in kwargs
        logits = out.logits[0]  # [N, V]
        hidden = out.hidden_states[-1][0] if want_hidden else None  # [N, H]
        return LMOut(logits=logits, hidden=hidden)

    @torch.inference_mode()  # the tree gather writes into cache tensors made in inference mode
    def keep(self, nodes: list[int]) -> None:
        """Commit the pending nodes ``nodes`` (in this order) and drop the other pending nodes.

        For a chain prefix ``[0, 1, ..., m-1]`` this is a crop; otherwise a gather along the
        sequence axis followed by a crop. The caller guarantees ``nodes`` forms a root-to-node path.
        """
        n = len(self._pending)
        assert all(0 <= i < n for i in nodes), (nodes, n)
        prefix = len(self._ids)
        if nodes != list(range(len(nodes))):
            index = torch.tensor([prefix + i for i in nodes], device=self.device)
            for layer in self._cache.layers:
                layer.keys[..., prefix : prefix + len(nodes), :] = layer.keys[..., index, :]
                layer.values[..., prefix : prefix + len(nodes), :] = layer.values[..., index, :]
        if n - len(nodes):
            self._cache.crop(-(n - len(nodes)))
        self._ids = self._ids + [self._pending[i] for i in nodes]
        self._pending = []

    # --- helpers ----------------------------------------------------------------------------------
    def _commit_pending_chain(self) -> None:
        # A forward after a chain forward without keep() keeps every pending node (drafting loop).
        assert self._pending_chain or not self._pending, "call keep() after a tree forward"
        if self._pending:
            self._ids = self._ids + self._pending
            self._pending = []

    def _drop_pending(self) -> None:
        if self._pending:
            self._cache.crop(-len(self._pending))
            self._pending = []

    def _tree_inputs(self, parent: torch.Tensor, prefix: int) -> dict:
        n = int(parent.shape[0])
        parents = parent.tolist()
        depth = [0] * n
        allowed = torch.zeros(n, n, dtype=torch.bool)
        for i in range(n):
            depth[i] = 0 if parents[i] < 0 else depth[parents[i]] + 1
            j = i
            while j >= 0:
                allowed[i, j] = True
                j = parents[j]
        dtype = self.model.dtype
        mask = torch.zeros(1, 1, n, prefix + n, dtype=dtype, device=self.device)  # [1, 1, N, P+N]
        block = torch.zeros(n, n, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        mask[0, 0, :, prefix:] = block.to(self.device)
        positions = torch.tensor(depth, device=self.device)[None] + prefix  # [1, N]
        return {"attention_mask": mask, "position_ids": positions}

    def _clock(self) -> float:
        if self.synchronize and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()


def _is_chain(parent: torch.Tensor) -> bool:
    n = int(parent.shape[0])
    return bool(torch.equal(parent.cpu(), torch.arange(-1, n - 1)))
