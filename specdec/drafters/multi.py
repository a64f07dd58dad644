"""MultiDraftDrafter: K i.i.d. draft chains, merged into one token tree (multi-draft SD).

Multi-candidate speculative decoding (Yang et al. 2024; SpecInfer, Miao et al. 2024; the HSD repo's
``multidraft=K``): K chains ``x^{(k)}_{1:γ}`` are sampled independently from the draft LM. They are
verified by recursive rejection *with replacement* (``verifier=rrs``) or HSD on trees
(``verifier=hsd``).

Tree layout (what the verifiers rely on): chains are inserted in order k = 1..K and merged where
their prefixes agree, so the continuations of every chain through a node are that node's children.
The children of a node are the draws of all chains through it, **in draw (chain) order**, so
siblings are i.i.d. draws from ``q[node]``. A draw that repeats a sibling's token becomes a
*duplicate leaf* (same token, no children) while its chain continues under the first node with
that token: the duplicate keeps the sampling multiplicity that the with-replacement residual update
needs (it is always rejected once its twin was, because the residual then gives its token zero
mass). Merging identical prefixes without duplicates would make the siblings a set of distinct
tokens, whose law is not i.i.d.; that is not lossless with the with-replacement rule.

Drafting cost: every token is forwarded once per step. ``lm.reconcile`` catches the draft cache up
and scores the root, then one draft forward per depth scores the new nodes some chain draws from
next (``drafters.tree.TreeGrower``: ``lm.forward`` for the first depth, ``lm.extend`` after it);
duplicate leaves, stop ids and the last depth are never forwarded. ``lm.keep([])`` drops the tree.
"""

from __future__ import annotations

import torch

from specdec.core import LM, Context, Draft, Drafter, Verdict
from specdec.drafters.limits import check_nodes
from specdec.drafters.policies import Policy
from specdec.drafters.tree import TreeGrower
from specdec.errors import BadInput
from specdec.sampling import warp


class MultiDraftDrafter(Drafter):
    """Drafts ``num_drafts`` i.i.d. chains of length ``policy.limit()`` as one tree.

    Args:
        lm: the draft model with its cache.
        policy: ``policy.limit()`` is the chain length γ (stop rules are not consulted).
        num_drafts: K ≥ 1 (K = 1 is an ordinary chain).
    """

    makes_trees = True

    def __init__(self, lm: LM, policy: Policy, num_drafts: int = 2) -> None:
        if lm is None:
            raise BadInput("a multi-draft drafter needs a draft model: set model=<pair>")
        if num_drafts < 1:
            raise BadInput(f"drafter.num_drafts must be >= 1, got {num_drafts}")
        self.lm, self.policy = lm, policy
        self.num_drafts = int(num_drafts)
        gamma = policy.longest()
        check_nodes(
            1 + self.num_drafts * gamma,
            what=f"drafter.num_drafts={self.num_drafts} chains of length {gamma}",
            fix="drafter.num_drafts or the policy's draft length",
        )
        self.models = [lm]

    def reset(self) -> None:
        self.lm.reset()
        self.policy.reset()

    def propose(self, ctx: Context) -> Draft:
        gamma = min(self.policy.limit(), ctx.budget - 1)
        grower = TreeGrower(self.lm, ctx.tokens.tolist())
        tokens, parent = [ctx.root], [-1]
        kids: list[dict[int, int]] = [{}]  # token -> first child node with that token
        heads: list[int | None] = [0] * self.num_drafts  # node each chain has reached
        q_rows: dict[int, torch.Tensor] = {}
        for _ in range(gamma):
            if all(h is None for h in heads):
                break
            # 1. Score the nodes the chains draw from (new ones only); q of each.
            grower.score([h for h in heads if h is not None], tokens, parent)
            for k, node in enumerate(heads):
                if node is None:
                    continue
                if node not in q_rows:
                    q_rows[node] = warp(grower.logits[node][None], ctx.sampling)[0]  # [V]
                # 2. Chain k draws its next token; a repeated token adds a duplicate leaf.
                tok = ctx.coins.categorical(q_rows[node])
                tokens.append(tok)
                parent.append(node)
                kids.append({})
                new = len(tokens) - 1
                heads[k] = kids[node].setdefault(tok, new)
                # 3. Nothing follows a stop id.
                if tok in ctx.stop_ids:
                    heads[k] = None
        grower.close()
        vocab = self.lm.vocab_size
        q = torch.zeros(len(tokens), vocab, dtype=torch.float64)  # [N, V]; leaves stay zero
        for node, row in q_rows.items():
            q[node] = row.to(q)
        return Draft(torch.tensor(tokens), torch.tensor(parent), q)

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        self.policy.observe(draft.num_drafted, verdict.num_accepted)
