"""Token-tree structure as functions of a parent array, defined once for every tree walker.

A tree of N nodes is described by ``parent [N]`` (a ``list[int]`` or 1-D LongTensor):
``parent[i] = -1`` means node ``i`` hangs off the root position (the committed prefix in a
``CachedLM``, or nothing for a ``Draft``'s root), otherwise ``parent[i] < i``, so nodes come in
topological order and one forward pass over the indices resolves every ancestor first. A *chain* is
``parent = [-1, 0, 1, ..., N-2]``.

Users: ``lm.CachedLM`` (tree masks and positions), ``verifiers.walk`` (children per node),
``core.Draft.is_chain``, ``testing.table_lm``.
"""

from __future__ import annotations

import torch

Parent = list[int] | torch.Tensor


def _as_list(parent: Parent) -> list[int]:
    """``parent`` as a list of ints, with the ``parent[i] < i`` invariant checked."""
    parents = [int(p) for p in parent.tolist()] if isinstance(parent, torch.Tensor) else parent
    assert all(-1 <= p < i for i, p in enumerate(parents)), f"bad parent array {parents}"
    return list(parents)


def depths(parent: Parent) -> list[int]:
    """Depth of every node; a node whose parent is ``-1`` has depth 0."""
    parents = _as_list(parent)
    depth = [0] * len(parents)
    for i, p in enumerate(parents):
        depth[i] = 0 if p < 0 else depth[p] + 1
    return depth


def children(parent: Parent) -> list[list[int]]:
    """``kids[i]``: the children of node ``i`` in node order (nodes under ``-1`` are in no list)."""
    parents = _as_list(parent)
    kids: list[list[int]] = [[] for _ in parents]
    for i, p in enumerate(parents):
        if p >= 0:
            kids[p].append(i)
    return kids


def ancestor_mask(parent: Parent) -> torch.Tensor:
    """``[N, N]`` bool; ``mask[i, j]`` is True when ``j`` is ``i`` or an ancestor of ``i``."""
    parents = _as_list(parent)
    n = len(parents)
    rows: list[list[bool]] = []  # built in Python, one tensor at the end (no op per node)
    for i, p in enumerate(parents):
        # 1. A node sees what its parent sees (parents come first), plus itself.
        row = rows[p].copy() if p >= 0 else [False] * n
        row[i] = True
        rows.append(row)
    return torch.tensor(rows, dtype=torch.bool).reshape(n, n)  # [N, N]


def is_chain(parent: Parent) -> bool:
    """Whether ``parent`` is ``[-1, 0, 1, ...]`` (the empty tree counts as a chain)."""
    parents = _as_list(parent)
    return parents == list(range(-1, len(parents) - 1))


def path_to(parent: Parent, node: int) -> list[int]:
    """Node indices from the top (a node with parent ``-1``) down to ``node``, inclusive."""
    parents = _as_list(parent)
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]
