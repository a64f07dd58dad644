"""CachedLM: a transformers causal LM plus its KV cache, appended to and pruned by node index.

This is the **only** module that touches ``past_key_values`` / ``DynamicCache`` (ARCHITECTURE B6).
API: ``reset()``, ``ids`` (the cached token ids), ``forward(tokens, parent)`` appends N *pending*
nodes after the committed prefix and returns their logits, ``extend(tokens, parent)`` grows the
pending nodes by a frontier (one forward of the new nodes only), ``keep(nodes)`` retains some
pending nodes (in order) and drops the rest, ``crop(length)`` truncates the cached prefix, and
``reconcile(ids)`` brings the cache to a list of committed ids (what drafters call each step).

Cache layout: committed prefix, then the pending nodes in the order they were appended. Trees use
an explicit 4-D additive attention mask (prefix fully visible, plus the ancestor matrix of the
pending tree, ``trees.ancestor_mask``) and position ids ``prefix_len + depth``; chains use the
model's causal path.

Every forward is appended to ``forward_log`` as
``ForwardRecord(role, new_tokens, context, seconds)``
so that the cost model can turn a run's log into modelled time (ARCHITECTURE §0.2).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

from specdec.core import LM, LMOut
from specdec.trees import ancestor_mask, depths, is_chain


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
        self._pending: list[int] = []  # ids appended since the last commit, not yet kept
        self._pending_parent: list[int] = []  # parent of each pending node (-1: the prefix)
        self._pending_chain = True
        self._cache = DynamicCache(config=model.config)

    # --- state ----------------------------------------------------------------------------------
    @property
    def ids(self) -> list[int]:
        """Token ids held in the cache: the committed prefix plus pending *chain* nodes."""
        return self._ids + self._pending if self._pending_chain else self._ids

    def reset(self) -> None:
        """Empty the cache."""
        self._ids, self._pending, self._pending_parent, self._pending_chain = [], [], [], True
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
        n = int(tokens.shape[0])
        parents = list(range(-1, n - 1)) if parent is None else [int(p) for p in parent.tolist()]
        return self._append(tokens, parents, want_hidden=want_hidden)

    @torch.inference_mode()
    def extend(
        self, tokens: torch.Tensor, parent: torch.Tensor, *, want_hidden: bool = False
    ) -> LMOut:
        """Grow the pending nodes by a frontier of ``M`` new nodes, forwarding only the new ones.

        Each new node sees the committed prefix, its pending ancestors and itself; its position is
        ``prefix_len + depth``. The new nodes get the next pending indices (the cache stays
        ``prefix + pending nodes in index order``), and afterwards the pending set is a tree that
        must be resolved with ``keep`` (``keep([])`` drops it all).

        Args:
            tokens: ``[M]`` token ids of the new nodes.
            parent: ``[M]`` parent per new node, indexing the pending nodes (0-based in the order
                they were appended, earlier new nodes included: ``parent[i] < P + i`` with ``P``
                pending nodes before the call), or ``-1`` for a node hanging off the prefix.
            want_hidden: also return the last layer's hidden states.

        Returns:
            ``LMOut(logits [M, V], hidden [M, H] | None)`` of the new nodes.
        """
        assert tokens.dim() == 1 and tokens.shape == parent.shape, (tokens.shape, parent.shape)
        out = self._append(tokens, [int(p) for p in parent.tolist()], want_hidden=want_hidden)
        self._pending_chain = False
        return out

    def reconcile(self, ids: list[int], *, want_hidden: bool = False) -> LMOut:
        """Bring the cache to the committed tokens ``ids`` (the last one is the root).

        Keeps the longest common prefix of the cached ids with ``ids[:-1]`` (pending tree nodes
        are dropped) and forwards the rest of ``ids`` as a pending chain, so the root is always
        forwarded and its logits are the last row of the result.
        """
        return reconcile_cache(self, ids, want_hidden=want_hidden)

    def _append(self, tokens: torch.Tensor, parents: list[int], *, want_hidden: bool) -> LMOut:
        """Forward new pending nodes after the pending ones; ``parents`` index the pending set."""
        n, prefix, before = int(tokens.shape[0]), len(self._ids), len(self._pending)
        ids = tokens.to(self.device).view(1, n)  # [1, N]
        parents = self._pending_parent + parents  # over every pending node, old and new
        kwargs: dict = {}
        if not is_chain(parents):
            kwargs.update(self._tree_inputs(parents, prefix, before))
        else:
            first = prefix + before
            kwargs["position_ids"] = torch.arange(first, first + n, device=self.device)[None]
        start = self._clock()
        out = self.model(
            input_ids=ids,
            past_key_values=self._cache,
            use_cache=True,
            output_hidden_states=want_hidden,
            **kwargs,
        )
        seconds = self._clock() - start
        self.forward_log.append(ForwardRecord(self.role, n, prefix + before, seconds))
        self._pending = self._pending + [int(t) for t in tokens.tolist()]
        self._pending_parent = parents
        self._pending_chain = "attention_mask" not in kwargs
        logits = out.logits[0]  # [N, V]
        hidden = out.hidden_states[-1][0] if want_hidden else None  # [N, H]
        return LMOut(logits=logits, hidden=hidden)

    @torch.inference_mode()  # the tree gather writes into cache tensors made in inference mode
    def keep(self, nodes: list[int]) -> None:
        """Commit the pending nodes ``nodes`` (in this order) and drop the other pending nodes.

        For a chain prefix ``[0, 1, ..., m-1]`` this is a crop; otherwise a gather along the
        sequence axis followed by a crop. ``nodes`` must be a path down from a node hanging off
        the prefix (indices over every pending node, ``extend``'s included).
        """
        n = len(self._pending)
        tops = [-1, *nodes[:-1]]
        path = all(0 <= i < n and self._pending_parent[i] == top for i, top in zip(nodes, tops))
        assert path, f"keep({nodes}) is not a path of the {n} pending nodes"
        prefix = len(self._ids)
        if nodes != list(range(len(nodes))):
            index = torch.tensor([prefix + i for i in nodes], device=self.device)
            for layer in self._cache.layers:
                layer.keys[..., prefix : prefix + len(nodes), :] = layer.keys[..., index, :]
                layer.values[..., prefix : prefix + len(nodes), :] = layer.values[..., index, :]
        if n - len(nodes):
            self._cache.crop(-(n - len(nodes)))
        self._ids = self._ids + [self._pending[i] for i in nodes]
        self._pending, self._pending_parent, self._pending_chain = [], [], True

    # --- helpers ----------------------------------------------------------------------------------
    def _commit_pending_chain(self) -> None:
        # A forward after a chain forward without keep() keeps every pending node (drafting loop).
        assert self._pending_chain or not self._pending, "call keep() after a tree forward"
        if self._pending:
            self._ids = self._ids + self._pending
            self._pending, self._pending_parent = [], []

    def _drop_pending(self) -> None:
        if self._pending:
            self._cache.crop(-len(self._pending))
            self._pending, self._pending_parent, self._pending_chain = [], [], True

    def _tree_inputs(self, parents: list[int], prefix: int, before: int) -> dict:
        # Rows: the new nodes (pending index >= before); columns: prefix + every pending node.
        allowed = ancestor_mask(parents)[before:]  # [N, before + N]
        n, dtype = int(allowed.shape[0]), self.model.dtype
        mask = torch.zeros(1, 1, n, prefix + len(parents), dtype=dtype, device=self.device)
        blocked = ~allowed.to(self.device)  # [N, before + N]
        mask[0, 0, :, prefix:].masked_fill_(blocked, torch.finfo(dtype).min)  # prefix stays 0
        positions = torch.tensor(depths(parents)[before:], device=self.device)[None] + prefix
        return {"attention_mask": mask, "position_ids": positions}  # positions: [1, N]

    def _clock(self) -> float:
        if self.synchronize and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def reconcile_cache(lm: LM, ids: list[int], *, want_hidden: bool = False) -> LMOut:
    """``lm.reconcile`` written once for every ``core.LM`` (``CachedLM``, ``TableLM``).

    Args:
        lm: the model whose cache is brought to ``ids``.
        ids: committed token ids (prompt + generated), at least one; the last one is the root.
        want_hidden: also return the last layer's hidden states.

    Returns:
        ``LMOut(logits [K, V], hidden)`` of the ``K >= 1`` forwarded tokens ``ids[-K:]``.
    """
    assert ids, "reconcile needs at least the root"
    keep = common_prefix(lm.ids, ids[:-1])
    lm.crop(keep)
    return lm.forward(torch.tensor(ids[keep:], dtype=torch.long), want_hidden=want_hidden)
