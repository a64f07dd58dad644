"""Candidates: the scored candidate tree every feature drafter builds, and its ``Draft``.

A feature drafter (``drafters.features``) grows a set of candidate tokens below the root, each
with its parent candidate (``-1``: the root), its depth (the root's children: 1) and its score,
the cumulative draft log-probability of its path (its own ``log q`` plus its parent's). The
drafter's *expansion rule* decides which candidates get which children (EAGLE-2's top-k per
depth, ``drafters.eagle3``; SpecBlock's rank-guided blocks, ``drafters.rank_tree``); this module
owns the rest: adding children (at most one per ``(parent, token)``), picking the frontier of a
depth, keeping the ``n`` best candidates and turning them into the verified ``Draft``.

**Ancestor closure.** A child's score is its parent's plus a log-probability ``<= 0``, so it never
exceeds its parent's; ranking by ``(-score, depth)`` therefore puts every candidate after its
ancestors, and the ``n`` best are closed under ancestry (``best`` asserts it). The kept candidates
are ordered by ``(depth, creation)``: parents before children, as ``Draft`` needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from specdec.core import Draft


@dataclass
class Candidates:
    """Tree nodes below the root (``parent = -1``), in creation order."""

    token: list[int] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    score: list[float] = field(default_factory=list)
    depth: list[int] = field(default_factory=list)
    _index: dict[tuple[int, int], int] = field(default_factory=dict)

    def add(self, token: int, parent: int, score: float) -> int | None:
        """Append a node (``None`` when ``parent`` already has a child ``token``)."""
        if (parent, token) in self._index:
            return None
        self.token.append(token), self.parent.append(parent), self.score.append(score)
        self.depth.append(1 if parent < 0 else self.depth[parent] + 1)
        self._index[(parent, token)] = len(self.token) - 1
        return len(self.token) - 1

    def base(self, parent: int) -> float:
        """The score a child of ``parent`` adds its log-probability to (the root's: 0)."""
        return 0.0 if parent < 0 else self.score[parent]

    def add_children(
        self, parent: int, logp: Sequence[float], tokens: Sequence[int]
    ) -> list[int | None]:
        """Children ``tokens`` of ``parent`` with log-probabilities ``logp`` (relative to the
        parent), in the given order; each entry is the new node or ``None`` (a duplicate)."""
        base = self.base(parent)
        return [self.add(int(t), parent, base + float(v)) for v, t in zip(logp, tokens)]

    def frontier(self, depth: int, n: int, stop_ids: frozenset[int] = frozenset()) -> list[int]:
        """The ``n`` best-scored nodes of ``depth`` that are no stop token (ties: creation)."""
        level = [
            i for i, d in enumerate(self.depth) if d == depth and self.token[i] not in stop_ids
        ]
        return sorted(level, key=lambda i: -self.score[i])[:n]

    def best(self, n: int) -> list[int]:
        """The ``n`` best candidates by score (ancestors first), ordered by depth then creation."""
        order = sorted(range(len(self.token)), key=lambda i: (-self.score[i], self.depth[i]))
        kept = order[:n]
        chosen = set(kept)
        assert all(self.parent[i] < 0 or self.parent[i] in chosen for i in kept), "ancestor closure"
        return sorted(kept, key=lambda i: (self.depth[i], i))

    def to_draft(self, root: int, kept: Sequence[int]) -> Draft:
        """The draft of ``root`` and the ``kept`` candidates (ancestors closed, parents first);
        deterministic, so ``q = None`` (the point-mass tree rules verify it)."""
        node = {c: n + 1 for n, c in enumerate(kept)}  # candidate -> draft node (root = 0)
        tokens = torch.tensor([root] + [self.token[c] for c in kept])  # [N]
        parent = torch.tensor([-1] + [node.get(self.parent[c], 0) for c in kept])  # [N]
        return Draft(tokens, parent, None)
