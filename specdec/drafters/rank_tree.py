"""SpecBlock's rank-guided tree (the public code's ``_build_tree_from_block1``,
github.com/shiweijiezero/SpecBlock).

One block gives, per slot ``k``, a draft distribution ``logp_k`` and a rank class ``r_k`` (rank
head: the target's token is expected at rank 1 / 2-4 / 5-10 / > 10). From a parent node:

1. the greedy chain ``g_0 .. g_{K-1}`` (argmax of each slot), ``g_k`` a child of ``g_{k-1}``;
2. per slot the width ``w_k = widths[r_k]`` (slot 0 of block 1: ``root_width`` when set, the code's
   beam width): ``g_k`` plus its ``w_k - 1`` best non-greedy tokens as siblings (children of
   ``g_{k-1}``);
3. a class with width 0 ("give up") ends the chain there: that slot and the later ones are dropped;
   so does a stop token (no children below it) and the depth limit.

Every node carries its cumulative draft log-probability (the slot's ``logp`` of its token plus its
parent's), in a ``drafters.candidates.Candidates`` tree, which keeps the ``total`` best nodes
(``Candidates.best``; a child never scores above its parent, so every kept node's ancestors too).
Later blocks start from *pending leaves*: every sibling alternative and the chain end, each with
its source slot ``s`` (the block's hidden at ``s`` conditions the next block).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from specdec.drafters.candidates import Candidates


@dataclass(frozen=True)
class Leaf:
    """A node a later block may continue: its candidate index and the slot that proposed it."""

    node: int
    slot: int


def grow_block(
    tree: Candidates,
    logp: torch.Tensor,
    classes: Sequence[int],
    token_map: torch.Tensor,
    *,
    widths: Sequence[int],
    parent: int = -1,
    root_width: int | None = None,
    depth_limit: int,
    stop_ids: frozenset[int] = frozenset(),
) -> tuple[list[Leaf], bool]:
    """Add one block's nodes below ``parent``; returns its pending leaves and whether it gave up.

    Args:
        tree: the candidates so far (grown in place).
        logp: ``[K, V_d]`` draft log-probabilities per slot (draft-vocabulary ids).
        classes: ``[K]`` rank class per slot (indices into ``widths``).
        token_map: ``[V_d]`` target token id of each draft-vocabulary id.
        widths: tokens per slot (greedy included) per rank class; 0 = give up.
        parent: the node the block continues (``-1``: the root).
        root_width: width of slot 0 regardless of its class (block 1), or ``None``.
        depth_limit: deepest node allowed (the root is depth 0).
        stop_ids: target token ids that end a path.
    """
    base = tree.base(parent)
    depth = 0 if parent < 0 else tree.depth[parent]
    leaves, prev, gave_up, ended = [], parent, False, False
    for k in range(min(int(logp.shape[0]), depth_limit - depth)):
        # 1. The slot's width from its rank class; 0 gives up on this slot and the later ones.
        width = root_width if (k == 0 and root_width is not None) else widths[int(classes[k])]
        if width < 1:
            gave_up = True
            break
        best = torch.topk(logp[k], min(width, int(logp.shape[1])))
        values, index = best.values.tolist(), best.indices.tolist()
        # 2. The greedy token continues the chain; the others become its siblings (leaves).
        greedy = tree.add(int(token_map[index[0]]), prev, base + values[0])
        for value, i in zip(values[1:], index[1:]):
            alt = tree.add(int(token_map[i]), prev, base + value)
            if alt is not None and tree.token[alt] not in stop_ids:
                leaves.append(Leaf(alt, k))
        # 3. A duplicate of an existing child or a stop token ends the chain.
        if greedy is None or tree.token[greedy] in stop_ids:
            ended = True
            break
        prev, base, last = greedy, base + values[0], k
    if not (gave_up or ended) and prev != parent:
        leaves.append(Leaf(prev, last))  # the chain end
    return leaves, gave_up
