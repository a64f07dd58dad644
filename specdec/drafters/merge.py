"""MergedTree: candidates of several draft sources in one token trie, each node scored once.

A hybrid drafter (``drafters.hybrid``) puts a draft model's candidate tree (``Candidates``, scored
by cumulative draft log-probability) and prompt-lookup match continuations (chains) below one root.
A path two sources both propose is one path: a node is keyed by ``(parent, token)``, so shared
prefixes merge (the idea of SAM-Decoding, Hu et al. 2024, arXiv 2411.10666, and REST, He et al.
2023, arXiv 2311.08252, retrieval drafts next to model drafts, here in one EAGLE-style tree).

Each node keeps what each source says about it: ``model[i]``, the draft model's path probability
``p`` (``None``: not a model candidate), and ``lookup[i]``, its lookup estimate (0: on no match's
chain) with ``chain[i]``, the match it continues. ``candidates`` scores a node by the larger of its
two acceptance estimates, capped by its parent's (so the best ``n`` are closed under ancestry, as
``Candidates.best`` requires), and returns the ``Candidates`` whose indices are this trie's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from specdec.drafters.candidates import Candidates


class MergedTree:
    """A token trie below the root (``parent = -1``); nodes in creation order, parents first."""

    def __init__(self) -> None:
        self.token: list[int] = []
        self.parent: list[int] = []
        self.model: list[float | None] = []  # draft path probability p, or None
        self.lookup: list[float] = []  # lookup acceptance estimate (0: no lookup chain)
        self.chain: list[int | None] = []  # the lookup match a node continues
        self._index: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        return len(self.token)

    def node(self, parent: int, token: int) -> int:
        """The node ``token`` below ``parent``, created if new."""
        key = (parent, int(token))
        if key not in self._index:
            self._index[key] = len(self.token)
            self.token.append(int(token)), self.parent.append(parent)
            self.model.append(None), self.lookup.append(0.0), self.chain.append(None)
        return self._index[key]

    def add_model(self, tree: Candidates) -> None:
        """Every candidate of a model tree, with path probability ``exp(score)``."""
        mine: dict[int, int] = {}  # candidate -> node
        for c, (tok, par, score) in enumerate(zip(tree.token, tree.parent, tree.score)):
            i = self.node(mine[par] if par >= 0 else -1, tok)
            mine[c] = i
            self.model[i] = math.exp(score)

    def add_chain(self, tokens: Sequence[int], estimates: Sequence[float], chain: int) -> None:
        """One match's continuation below the root, node ``j`` estimated ``estimates[j]``."""
        parent = -1
        for tok, est in zip(tokens, estimates):
            parent = self.node(parent, tok)
            if est >= self.lookup[parent]:
                self.lookup[parent], self.chain[parent] = float(est), chain

    def estimates(self, model_estimate: Callable[[float], float]) -> list[float]:
        """Per node: the larger source estimate (model ones through ``model_estimate``), capped
        by its parent's."""
        out: list[float] = []
        for i, par in enumerate(self.parent):
            p = self.model[i]
            est = max(self.lookup[i], model_estimate(p) if p is not None else 0.0)
            out.append(min(est, out[par]) if par >= 0 else est)
        return out

    def candidates(
        self, model_estimate: Callable[[float], float]
    ) -> tuple[Candidates, list[float]]:
        """The trie as ``Candidates`` scored by log-estimate (same indices), and the estimates."""
        est = self.estimates(model_estimate)
        tree = Candidates()
        for tok, par, a in zip(self.token, self.parent, est):
            tree.add(tok, par, math.log(a) if a > 0 else -math.inf)
        return tree, est
