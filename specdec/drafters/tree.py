"""TopKTreeDrafter: a static-shape token tree of the draft LM's top-k tokens (point-mass proposals).

EAGLE-style deterministic trees (Li et al. 2024, "EAGLE: Speculative Sampling Requires Rethinking
Feature Uncertainty"; Medusa/SpecInfer static trees): every node at depth ``d`` gets the
``branching[d]`` most likely next tokens of the draft LM as children. The candidates are a
deterministic function of the context, so the draft has ``q = None`` and verifiers treat each child
as a point mass (recursive rejection *without replacement*: ``verifier=rrs``, or ``hsd`` on trees).

Drafting cost: one tree-masked draft forward per depth over the tree built so far (the draft cache
is reconciled to the committed tokens first and the tree nodes are dropped after each forward).
The shared helpers ``sync_cache`` and ``score_tree`` are also used by ``drafters.multi``.
"""

from __future__ import annotations

import torch

from specdec.core import LM, Context, Draft, Drafter, Verdict
from specdec.drafters.model import common_prefix
from specdec.drafters.policies import Policy
from specdec.sampling import Sampling


def sync_cache(lm: LM, ids: list[int]) -> None:
    """Make the draft cache hold ``ids[:-1]`` (every committed token but the root)."""
    keep = common_prefix(lm.ids, ids[:-1])
    lm.crop(keep)
    if len(ids) - 1 > keep:
        lm.forward(torch.tensor(ids[keep:-1]))  # pending chain: committed by the next forward


def score_tree(lm: LM, tokens: list[int], parent: list[int]) -> torch.Tensor:
    """``[N, V]`` draft logits of every tree node; the cache is left at the committed prefix."""
    out = lm.forward(torch.tensor(tokens), torch.tensor(parent))
    lm.keep([])
    return out.logits


class TopKTreeDrafter(Drafter):
    """Drafts a deterministic tree of top-k draft tokens.

    Args:
        lm: the draft model with its cache.
        policy: ``policy.limit()`` caps the tree depth.
        sampling: unused (candidates are ranked by raw draft logits, the same order as the warped
            distribution); accepted so every drafter is built the same way.
        branching: children per node at each depth (depth ``d`` uses ``branching[d]``, then 1).
    """

    makes_trees = True

    def __init__(
        self, lm: LM, policy: Policy, sampling: Sampling, branching: list[int] = (2, 2, 1)
    ) -> None:
        if lm is None:
            raise ValueError("a tree drafter needs a draft model: set model=<pair> with a draft")
        if not branching or min(branching) < 1:
            raise ValueError(f"drafter.branching must be a list of ints >= 1, got {branching}")
        self.lm, self.policy, self.sampling = lm, policy, sampling
        self.branching = [int(b) for b in branching]
        self.models = [lm]

    def reset(self) -> None:
        self.lm.reset()
        self.policy.reset()

    def propose(self, ctx: Context) -> Draft:
        depth_limit = min(self.policy.limit(), ctx.budget - 1)
        sync_cache(self.lm, ctx.tokens.tolist())
        tokens, parent, frontier = [ctx.root], [-1], [0]
        for depth in range(depth_limit):
            # 1. Score the tree so far; 2. give every frontier node its top-k children.
            logits = score_tree(self.lm, tokens, parent)  # [N, V]
            width = self.branching[depth] if depth < len(self.branching) else 1
            width = min(width, int(logits.shape[-1]))
            grown = []
            for node in frontier:
                if tokens[node] in ctx.stop_ids and node != 0:
                    continue  # nothing follows a stop id
                for tok in torch.topk(logits[node], width).indices.tolist():
                    tokens.append(int(tok))
                    parent.append(node)
                    grown.append(len(tokens) - 1)
            frontier = grown
        return Draft(torch.tensor(tokens), torch.tensor(parent), None)

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        self.policy.observe(draft.num_drafted, verdict.num_accepted)
