"""Branch trees: chains that fork once, at their first uncertain token, into k branches.

SpecBranch (Shen et al., ICLR 2026, "Branch Resampling"): a draft chain ``x_1, x_2, ...``
forks at the branch point ``x_b`` into ``k = max(1, ⌊k_max·(1 − q(x_b))⌋)`` branches, each
continued as a chain. Symbols here: ``q(x)`` = the draft model's probability of the drafted token
at temperature 1 (its *confidence*, ``softmax(logits)[x]``, whatever the sampling warp); ε =
``threshold``; b = the **first** drafted position whose confidence is below ε (not the least
confident one: "first" is decided online while drafting, "least" needs the whole chain drafted
and then re-drafted after b, and the paper's confidence-based class uses the first).

Two ways to fork (``topk``):

* **sampled** (``topk=False``): the chain's tokens are draws from the warped ``q``; at b the chain's
  own token ``x_b`` is the first branch and ``k − 1`` more tokens are drawn i.i.d. from the same
  row ``q(·|x_<b)``. A draw repeating an earlier sibling's token becomes a *duplicate leaf* (no
  continuation), as in ``drafters.multi``. Verified by recursive rejection *with replacement*
  (``verifier=rrs`` with ``draft.q``).
* **top-k** (``topk=True``): the chain is the draft's argmax, and at b the k most likely tokens are
  the branches (the paper's and its code's choice). Deterministic given the context: ``q = None``,
  point-mass rule (recursive rejection without replacement).

**Why a data-dependent k is exact (sampled).** k is a function of the past and of ``x_b`` only,
i.e. of the *first* sibling, and the other ``k − 1`` siblings are fresh i.i.d. draws from
``q(·|x_<b)`` given k. The sibling walk (``verifiers.walk``) tests ``x_b``'s chain first; a
sibling is tried only after ``x_b`` itself was rejected, and then the target's next token must
come out distributed as the residual ``r = norm((p − q)⁺)``. Conditionally on ``x_b`` (hence on
k) and on that rejection, the remaining siblings are ``k − 1`` i.i.d. draws from ``q`` verified
with replacement against ``r``, which emits exactly ``r`` for every fixed ``k − 1 ≥ 0`` (with
none left, the walk draws from ``r`` itself). So the output law given ``x_b`` does not depend on k,
and the step is lossless whatever rule maps ``q(x_b)`` to k. (Were k computed from a later
sibling, the siblings would no longer be i.i.d. given k.) Which position is b is likewise a
function of the chain's own tokens, i.e. a stopping rule, and the branches' continuations are
chains drawn from ``q`` after each branch token. ``tests/drafters/test_specbranch_exact.py``
checks it by exact enumeration through the engine.

Cost: one draft forward per depth over every frontier node (``drafters.tree.TreeGrower``); the
nodes given as the starting tree are scored in the first forward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from specdec.coins import Coins
from specdec.drafters.tree import TreeGrower
from specdec.sampling import Sampling, warp


@dataclass(frozen=True)
class BranchRule:
    """How a branch tree grows below one head node.

    Attributes:
        depth: most tokens below the head on any root-to-leaf path.
        threshold: ε; a drafted token with confidence below it is the branch point.
        k_max: the most branches at a branch point (1: never fork).
        stop_at_branch: the soft stop: the branch tokens are leaves (the draft ends at its first
            uncertain token); otherwise every branch continues as a chain to ``depth``.
        fork_first: fork at the first token whatever its confidence (H-RAD's "all reject").
    """

    depth: int
    threshold: float
    k_max: int
    stop_at_branch: bool = True
    fork_first: bool = False


def branch_count(confidence: float, k_max: int) -> int:
    """The paper's ``k = max(1, ⌊k_max·(1 − q(x_b))⌋)``."""
    return max(1, math.floor(k_max * (1.0 - confidence)))


class BranchGrower:
    """Grows branch trees below given head nodes of one draft tree, all heads batched per depth.

    Args:
        grower: the draft cache's tree (``TreeGrower`` on the committed tokens).
        tokens, parent: the starting tree (node 0 the root); grown in place.
        sampling: the warp of ``q`` (sampled mode).
        topk: top-k forks with argmax chains (``q = None``) instead of sampled ones.
        coins: randomness (sampled mode).
        stop_ids: nothing is drafted after these.
    """

    def __init__(
        self,
        grower: TreeGrower,
        tokens: list[int],
        parent: list[int],
        sampling: Sampling,
        *,
        topk: bool,
        coins: Coins,
        stop_ids: frozenset[int] = frozenset(),
    ) -> None:
        self.grower, self.tokens, self.parent = grower, tokens, parent
        self.sampling, self.topk, self.coins, self.stop_ids = sampling, topk, coins, stop_ids
        self.q_rows: dict[int, torch.Tensor] = {}  # node -> [V] warped q over its children
        self.forks: list[int] = []  # branch counts of the forks made (one per head at most)

    def grow(self, heads: list[tuple[int, BranchRule]], extra: list[int] = ()) -> None:
        """Grow a branch tree below each ``(head, rule)``, one draft forward per depth.

        ``extra``: starting-tree nodes to score in the first forward (the heads' ancestors).
        """
        # frontier entries: (node, tokens left below it, forked already, its head's rule)
        frontier = [(h, rule.depth, False, rule) for h, rule in heads if rule.depth > 0]
        first = list(extra)
        while frontier:
            # 1. One forward scores every frontier node (and, the first time, their ancestors).
            self.grower.score(first + [n for n, *_ in frontier], self.tokens, self.parent)
            first, grown = [], []
            for node, left, forked, rule in frontier:
                # 2. The node's next token and its confidence q(x) at temperature 1.
                logits = self.grower.logits[node]  # [V]
                conf = logits.double().softmax(-1)  # [V]
                if self.topk:
                    tok = int(conf.argmax())
                else:
                    self.q_rows[node] = warp(logits[None], self.sampling)[0]  # [V]
                    tok = self.coins.categorical(self.q_rows[node])
                depth_here = rule.depth - left + 1  # 1 = the head's child
                fork = (
                    not forked
                    and rule.k_max > 1
                    and (float(conf[tok]) < rule.threshold or (rule.fork_first and depth_here == 1))
                )
                soft_stop = (
                    not forked
                    and rule.stop_at_branch
                    and (float(conf[tok]) < rule.threshold or (rule.fork_first and depth_here == 1))
                )
                # 3. The branch tokens: the chain's own token first, then k - 1 more.
                branch = [tok]
                if fork:
                    k = branch_count(float(conf[tok]), rule.k_max)
                    self.forks.append(k)
                    if self.topk:
                        branch = torch.topk(conf, min(k, conf.numel())).indices.tolist()
                    else:
                        branch += [self.coins.categorical(self.q_rows[node]) for _ in range(k - 1)]
                seen: set[int] = set()
                for tok in branch:
                    self.tokens.append(int(tok))
                    self.parent.append(node)
                    new = len(self.tokens) - 1
                    # 4. A duplicate, a stop id, the soft stop or the depth end a branch.
                    keep = (
                        tok not in seen and tok not in self.stop_ids and left > 1 and not soft_stop
                    )
                    seen.add(tok)
                    if keep:
                        grown.append((new, left - 1, forked or fork, rule))
            frontier = grown

    def q(self, vocab: int) -> torch.Tensor | None:
        """``[N, V]`` q rows of the grown tree (zero for unscored nodes); ``None`` for top-k."""
        if self.topk:
            return None
        q = torch.zeros(len(self.tokens), vocab, dtype=torch.float64)  # [N, V]
        for node, row in self.q_rows.items():
            q[node] = row.to(q)
        return q


def subtree(parent: list[int], top: int) -> list[int]:
    """``top`` and its descendants, in node order (topological)."""
    inside, nodes = {top}, [top]
    for i in range(top + 1, len(parent)):
        if parent[i] in inside:
            inside.add(i)
            nodes.append(i)
    return nodes


def leaves(parent: list[int]) -> list[int]:
    """Nodes without children (the root alone counts as one)."""
    has_kids = set(parent[1:])
    return [i for i in range(len(parent)) if i not in has_kids]
