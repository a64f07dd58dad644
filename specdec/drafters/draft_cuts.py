"""Cutting a ``Draft`` tree: a node's subtree re-rooted, a depth trim, a node's ancestors.

SpecBranch (``drafters.specbranch``) hands the worker's subtree under the emitted token to the
next step (``extract``), shortens a reused subtree to one token when H-RAD predicts all-reject
(``trim``) and scores a head's ancestors in the worker's first forward (``ancestors``). The
``q`` rows travel with their nodes.
"""

from __future__ import annotations

import torch

from specdec.core import Draft
from specdec.drafters.branch_tree import subtree
from specdec.trees import depths


def ancestors(parent: list[int], node: int) -> list[int]:
    """``node`` and its ancestors, up to the root (``parent`` indices)."""
    out = []
    while node >= 0:
        out.append(node)
        node = parent[node]
    return out


def extract(tree: Draft, top: int) -> Draft:
    """The subtree of ``tree`` under node ``top``, re-rooted there (q rows carried along)."""
    parent = tree.parent.tolist()
    nodes = subtree(parent, top)
    index = {old: new for new, old in enumerate(nodes)}
    new_parent = [-1] + [index[parent[n]] for n in nodes[1:]]
    q = None if tree.q is None else tree.q[nodes]  # [M, V]
    return Draft(tree.tokens[nodes], torch.tensor(new_parent), q)


def trim(draft: Draft, depth: int) -> Draft:
    """``draft`` without the nodes deeper than ``depth`` drafted tokens."""
    keep = [i for i, d in enumerate(depths(draft.parent.tolist())) if d <= depth]
    if len(keep) == draft.tokens.numel():
        return draft
    index = {old: new for new, old in enumerate(keep)}
    parent = [-1 if draft.parent[i] < 0 else index[int(draft.parent[i])] for i in keep]
    q = None if draft.q is None else draft.q[keep]  # [M, V]
    return Draft(draft.tokens[keep], torch.tensor(parent), q)
