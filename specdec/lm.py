"""CachedLM: a transformers causal LM plus its KV cache, appended to and pruned by node index.

This is the **only** module that touches the decoding KV cache (``DynamicCache``).
API: ``reset()``, ``ids`` (the cached token ids), ``forward(tokens, parent)`` appends N *pending*
nodes after the committed prefix and returns their logits, ``extend(tokens, parent)`` grows the
pending nodes by a frontier (one forward of the new nodes only), ``keep(nodes)`` retains some
pending nodes (in order) and drops the rest, ``crop(length)`` truncates the cached prefix, and
``reconcile(ids)`` brings the cache to a list of committed ids (what drafters call each step).

Cache layout: committed prefix, then the pending nodes in the order they were appended; their
positions and a tree's attention mask come from ``specdec.lm_inputs``.

Feature drafters: ``forward(..., hidden_layers=(i, j, ...))`` also returns the hidden states of
those layers (``hidden [N, k, H]``; index ``i`` into transformers' ``hidden_states``: 0 = the
embeddings, ``l`` = after decoder layer ``l``, ``-1`` = the last, after the final norm);
``embed(tokens)`` and ``head(hidden)`` expose the input embedding and the output head (read-only,
no cache change: ``specdec.lm_base``, the model's side); ``forward(..., inputs_embeds=...)`` feeds
embeddings instead of token ids.

Every forward is appended to ``forward_log`` as a ``specdec.forwards.ForwardRecord`` (role, new
tokens, context, seconds, start/end, lane, step) so that the cost model can turn a run's log into
modelled time; ``synchronize`` syncs every CUDA device holding weights. A draft with other
output rows than the target (``specdec.vocab``) is fitted to them here. ``threads``: the model's
own torch threads. ``static=True`` (``model.static_cache``) keeps the cache in fixed-shape
tensors and pads each forward to a bucket (``specdec.static_cache``), same tokens; ``graphs``
(``model.cuda_graphs``) replays those forwards through ``specdec.graphs`` (CUDA graphs on CUDA).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from transformers import DynamicCache, PreTrainedModel

from specdec.core import LMOut
from specdec.forwards import ForwardRecord, current_lane, nonfinite_error
from specdec.graphs import graph_runner
from specdec.lm_base import LMBase
from specdec.lm_inputs import node_inputs, position_inputs
from specdec.models.cache_arg import cache_kwarg
from specdec.reconcile import reconcile_cache
from specdec.static_cache import StaticKV, drop_last, gather_nodes
from specdec.threads import forward_budget
from specdec.trees import is_chain
from specdec.vocab import fit_rows

Layers = Sequence[int]  # indices into transformers' hidden_states (0 = embeddings, -1 = last)
Embeds = torch.Tensor | Callable[[], torch.Tensor]  # [N, H], or made inside the timed forward


class CachedLM(LMBase):
    """A causal LM with a KV cache holding a committed prefix of token ids.

    Args (``model``, ``role``, ``synchronize``, ``threads``, ``vocab_size``: ``lm_base.LMBase``'s):
        static: a static cache of ``max_cache_len`` slots (None: grown by doubling as needed, up
            to the model's positions + 64) and bucketed forwards (``specdec.static_cache``)
            instead of ``DynamicCache``; ``graphs``: replay them from fixed buffers
            (``specdec.graphs``; ``None``: on CUDA only).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        role: str = "target",
        *,
        synchronize: bool = False,
        threads: int | None = None,
        vocab_size: int | None = None,
        static: bool = False,
        max_cache_len: int | None = None,
        graphs: bool | None = None,
    ):
        super().__init__(
            model, role, synchronize=synchronize, threads=threads, vocab_size=vocab_size
        )
        self._ids: list[int] = []
        self._pending: list[int] = []  # ids appended since the last commit, not yet kept
        self._pending_parent: list[int] = []  # parent of each pending node (-1: the prefix)
        self._pending_chain = True
        self._cache_kw = cache_kwarg(model)  # `cache` (transformers >= 5.2x) or `past_key_values`
        self._static: StaticKV | None = None
        self._cache, self.graphs = DynamicCache(config=model.config), None  # graphs None: eager
        if static:
            self.use_static(max_cache_len, graphs)

    # --- state ----------------------------------------------------------------------------------
    @property
    def static(self) -> bool:
        """Whether the cache is static (``model.static_cache``)."""
        return self._static is not None

    def use_static(self, max_cache_len: int | None = None, graphs: bool | None = None) -> None:
        """Make an empty cache static (``compose`` does it for a drafter's own model)."""
        if self._ids or self._pending:
            raise ValueError("use_static needs an empty cache: call it before any forward")
        self._static = StaticKV(self.model, max_cache_len)
        self._cache = self._static.cache
        self.graphs = graph_runner(self.model, self._static, self._cache_kw, graphs)

    @property
    def ids(self) -> list[int]:
        """Token ids held in the cache: the committed prefix plus pending *chain* nodes."""
        return self._ids + self._pending if self._pending_chain else self._ids

    def reset(self) -> None:
        """Empty the cache."""
        if self._static is not None:  # in place: the tensors keep their addresses
            self._static.reset(len(self._ids) + len(self._pending))
        else:
            self._cache = DynamicCache(config=self.model.config)
        self._ids, self._pending, self._pending_parent, self._pending_chain = [], [], [], True

    def crop(self, length: int) -> None:
        """Keep only the first ``length`` tokens (pending chain nodes count as committed, pending
        tree nodes are dropped)."""
        if self._pending_chain:
            self._commit_pending_chain()
        self._drop_pending()
        assert 0 <= length <= len(self._ids), (length, len(self._ids))
        remove = len(self._ids) - length
        if remove:
            drop_last(self._cache, remove)
            self._ids = self._ids[:length]

    # --- forward / keep -------------------------------------------------------------------------
    @torch.inference_mode()
    def forward(
        self,
        tokens: torch.Tensor,
        parent: torch.Tensor | None = None,
        *,
        hidden_layers: Layers = (),
        inputs_embeds: Embeds | None = None,
    ) -> LMOut:
        """Append ``tokens`` after the committed prefix and return their logits.

        Args:
            tokens: ``[N]`` token ids (a chain, or a tree described by ``parent``).
            parent: ``[N]`` parent index per node (``-1`` for nodes whose parent is the prefix), or
                ``None`` for a chain.
            hidden_layers: also return these layers' hidden states (see the module docstring).
            inputs_embeds: ``[N, H]`` input embeddings fed instead of the tokens' own (the
                tokens still name the cached ids), or a function returning them, which then runs
                inside the forward's timed region (a feature drafter's input fusion is part of
                its forward's cost).

        Returns:
            ``LMOut(logits [N, V], hidden [N, k, H] | None)``. The nodes stay *pending* until
            ``keep``; pending chain nodes are committed by the next ``forward`` or ``crop`` (the
            drafting loop), pending tree nodes must be resolved with ``keep`` first.
        """
        assert tokens.dim() == 1, "batch size 1: pass a 1-D tensor of token ids"
        self._commit_pending_chain()
        n = int(tokens.shape[0])
        parents = list(range(-1, n - 1)) if parent is None else [int(p) for p in parent.tolist()]
        return self._append(tokens, parents, hidden_layers, inputs_embeds)

    @torch.inference_mode()
    def extend(
        self,
        tokens: torch.Tensor,
        parent: torch.Tensor,
        *,
        hidden_layers: Layers = (),
        inputs_embeds: Embeds | None = None,
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
            hidden_layers, inputs_embeds: as in ``forward``.

        Returns:
            ``LMOut(logits [M, V], hidden [M, k, H] | None)`` of the new nodes.
        """
        assert tokens.dim() == 1 and tokens.shape == parent.shape, (tokens.shape, parent.shape)
        parents = [int(p) for p in parent.tolist()]
        out = self._append(tokens, parents, hidden_layers, inputs_embeds)
        self._pending_chain = False
        return out

    def reconcile(self, ids: list[int], *, hidden_layers: Layers = ()) -> LMOut:
        """Bring the cache to the committed tokens ``ids`` (the last one is the root).

        Keeps the longest common prefix of the cached ids with ``ids[:-1]`` (pending tree nodes
        are dropped) and forwards the rest of ``ids`` as a pending chain, so the root is always
        forwarded and its logits are the last row of the result.
        """
        return reconcile_cache(self, ids, hidden_layers=hidden_layers)

    def _append(
        self,
        tokens: torch.Tensor,
        parents: list[int],
        hidden_layers: Layers,
        inputs_embeds: Embeds | None,
    ) -> LMOut:
        """Forward new pending nodes after the pending ones; ``parents`` index the pending set.

        The logged time covers preparing the inputs (a callable ``inputs_embeds``, the tree mask),
        the model call and the finiteness check of its logits: the first pass over fresh logits
        pays for reading them from memory (~70 us per 49k-token row on CPU, ~3 us warm), a cost of
        producing the output any first reader pays, so it is priced with the forward. A
        non-finite output raises once the forward is logged and its nodes are pending."""
        n, prefix, before = int(tokens.shape[0]), len(self._ids), len(self._pending)
        parents = self._pending_parent + parents  # over every pending node, old and new
        start = self._clock()
        try:
            with forward_budget(self.threads):  # the loop itself runs on one thread (threads.py)
                kwargs = self._inputs(tokens, parents, inputs_embeds, prefix, before)
                out = (
                    self.graphs.forward(kwargs, n, hidden_layers)
                    if self.graphs
                    else self.model(
                        **{self._cache_kw: self._cache},
                        use_cache=True,
                        output_hidden_states=bool(hidden_layers),
                        **kwargs,
                    )
                )
                if self._static is not None:
                    self._static.trim()  # the bucket's padding rows leave the cache
                logits = fit_rows(out.logits[0, :n], self.vocab_size)  # [N, V]
                bad = nonfinite_error(logits, role=self.role, context=prefix + before)
        finally:
            end = self._clock()
        where, step = current_lane()
        self.forward_log.append(
            ForwardRecord(self.role, n, prefix + before, end - start, start, end, where, step)
        )
        self._pending = self._pending + [int(t) for t in tokens.tolist()]
        self._pending_parent = parents
        self._pending_chain = is_chain(parents)
        if bad is not None:
            raise bad
        hidden = None
        if hidden_layers:
            hidden = torch.stack([out.hidden_states[i][0, :n] for i in hidden_layers], 1)  # [N,k,H]
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
            gather_nodes(self._cache, self.device, prefix, nodes)  # a tree path, in place
        if n - len(nodes):
            drop_last(self._cache, n - len(nodes))
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
            drop_last(self._cache, len(self._pending))
            self._pending, self._pending_parent, self._pending_chain = [], [], True

    def _inputs(
        self,
        tokens: torch.Tensor,
        parents: list[int],
        inputs_embeds: Embeds | None,
        prefix: int,
        before: int,
    ) -> dict:
        """The model's keyword inputs for new nodes (``specdec.lm_inputs``); ``parents`` run over
        every pending node, old and new."""
        embeds = inputs_embeds() if callable(inputs_embeds) else inputs_embeds
        kwargs = node_inputs(tokens, embeds, self.device, self.input_rows)
        if self._static is not None:  # padded to a bucket, with an explicit mask
            kwargs = self._static.inputs(kwargs, parents, prefix, before)
            self._cache = self._static.cache  # a new, bigger one after a growth (StaticKV.grow)
            return kwargs
        return kwargs | position_inputs(parents, prefix, before, self.device, self.model.dtype)
