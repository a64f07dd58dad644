"""TopKTreeDrafter: a static-shape token tree of the draft LM's top-k tokens (point-mass proposals).

EAGLE-style deterministic trees (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking
Feature Uncertainty"; Medusa/SpecInfer static trees): every node at depth ``d`` gets the
``branching[d]`` most likely next tokens of the draft LM as children. The candidates are a
deterministic function of the context, so the draft has ``q = None`` and verifiers treat each child
as a point mass (recursive rejection *without replacement*: ``verifier=rrs``, or ``hsd`` on trees).

Drafting cost: every token is forwarded once per step. ``lm.reconcile`` catches the draft cache up
to the committed tokens and scores the root; then one draft forward per depth scores only the new
frontier (``lm.forward`` for the first, ``lm.extend`` of the pending tree after it), skipping nodes
that get no children (stop ids, the last depth); ``lm.keep([])`` drops the tree at the end, so the
root stays committed. ``TreeGrower`` does this bookkeeping and is shared with ``drafters.multi``.
"""

from __future__ import annotations

import torch

from specdec.core import LM, Context, Draft, Drafter, Verdict
from specdec.drafters.limits import check_nodes, check_width, tree_nodes
from specdec.drafters.policies import Policy
from specdec.errors import BadInput


class TreeGrower:
    """A draft tree scored in the draft cache frontier by frontier, each node forwarded once.

    Draft node 0 is the root: ``lm.reconcile`` forwards it as the last node of a pending chain, and
    the first ``score`` commits it (a ``forward`` whose parents are all ``-1``). Every later
    ``score`` is an ``extend`` of the pending tree, whose pending indices therefore exclude the
    root: ``slot`` maps each forwarded draft node to its pending index (draft nodes that are never
    forwarded, like leaves, get none). ``close`` drops the tree, leaving prefix + root committed.

    Args:
        lm: the draft model with its cache.
        ids: every committed token (prompt + generated); the last one is the root.
    """

    def __init__(self, lm: LM, ids: list[int]) -> None:
        self.lm = lm
        self.logits: dict[int, torch.Tensor] = {0: lm.reconcile(ids).logits[-1]}  # node -> [V]
        self.slot: dict[int, int] = {0: -1}  # draft node -> pending index; root: the prefix

    def score(self, nodes: list[int], tokens: list[int], parent: list[int]) -> None:
        """Forward the draft nodes in ``nodes`` that are not scored yet, filling ``self.logits``.

        Their parents must be scored already or among them; they are forwarded in node order.
        """
        fresh = sorted({n for n in nodes if n not in self.logits})
        if not fresh:
            return
        first = len(self.slot) == 1  # only the root so far: this forward starts the tree
        base = len(self.slot) - 1
        self.slot.update({n: base + i for i, n in enumerate(fresh)})
        new = torch.tensor([tokens[n] for n in fresh], dtype=torch.long)  # [M]
        par = torch.tensor([self.slot[parent[n]] for n in fresh], dtype=torch.long)  # [M]
        out = self.lm.forward(new, par) if first else self.lm.extend(new, par)
        self.logits.update(zip(fresh, out.logits))  # out.logits: [M, V]

    def close(self) -> None:
        """Drop the tree from the draft cache (nothing to drop if no frontier was forwarded)."""
        if len(self.slot) > 1:
            self.lm.keep([])


class TopKTreeDrafter(Drafter):
    """Drafts a deterministic tree of top-k draft tokens.

    Args:
        lm: the draft model with its cache.
        policy: ``policy.limit()`` caps the tree depth.
        branching: children per node at each depth (depth ``d`` uses ``branching[d]``, then 1).
    """

    makes_trees = True

    def __init__(
        self,
        lm: LM,
        policy: Policy,
        branching: list[int] = (2, 2, 1),
    ) -> None:
        if lm is None:
            raise BadInput("a tree drafter needs a draft model: set model=<pair> with a draft")
        if not branching or min(branching) < 1:
            raise BadInput(f"drafter.branching must be a list of ints >= 1, got {branching}")
        self.lm, self.policy = lm, policy
        self.branching = [int(b) for b in branching]
        for b in self.branching:
            check_width("drafter.branching", b, lm.vocab_size)
        depth = policy.longest()
        check_nodes(
            tree_nodes(self.branching, depth, lm.vocab_size),
            what=f"drafter.branching={self.branching} at depth {depth}",
            fix="drafter.branching or the policy's draft length",
        )
        self.models = [lm]

    def reset(self) -> None:
        self.lm.reset()
        self.policy.reset()

    def propose(self, ctx: Context) -> Draft:
        depth_limit = min(self.policy.limit(), ctx.budget - 1)
        grower = TreeGrower(self.lm, ctx.tokens.tolist())
        tokens, parent, frontier = [ctx.root], [-1], [0]
        for depth in range(depth_limit):
            # 1. Score the frontier (the root was scored by reconcile).
            grower.score(frontier, tokens, parent)
            # 2. Give every frontier node its top-k children.
            width = self.branching[depth] if depth < len(self.branching) else 1
            width = min(width, self.lm.vocab_size)
            grown = []
            for node in frontier:
                for tok in torch.topk(grower.logits[node], width).indices.tolist():
                    tokens.append(int(tok))
                    parent.append(node)
                    grown.append(len(tokens) - 1)
            # 3. Nothing follows a stop id.
            frontier = [node for node in grown if tokens[node] not in ctx.stop_ids]
        grower.close()
        return Draft(torch.tensor(tokens), torch.tensor(parent), None)

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        self.policy.observe(draft.num_drafted, verdict.num_accepted)
