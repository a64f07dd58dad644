"""ModelDrafter: a small draft LM proposes a chain of tokens, one draft forward per token.

Speculative sampling's drafting half (Leviathan et al. 2023, "Fast Inference from Transformers via
Speculative Decoding"; Chen et al. 2023): draft tokens ``x_1..x_γ`` are sampled autoregressively
from the warped draft distributions ``q_0..q_{γ-1}``; the draft length comes from a ``Policy``.

The drafter owns its ``CachedLM`` and reconciles it to the committed tokens at every ``propose``
(``lm.reconcile``: crop to the longest common prefix, then forward the missing tokens), so the
engine never has to roll the draft cache back.
"""

from __future__ import annotations

import torch

from specdec.core import LM, Context, Draft, Drafter, Verdict
from specdec.drafters.policies import DraftState, Policy
from specdec.errors import BadInput
from specdec.rowops import argmax_rows
from specdec.sampling import warp


class ModelDrafter(Drafter):
    """Drafts a chain with a draft LM.

    Args:
        lm: the draft model with its cache.
        policy: decides the draft length.

    ``q`` is warped with the step's sampling (``ctx.sampling``, the target's: ``q`` must be what
    the tokens are drawn from).
    """

    def __init__(self, lm: LM, policy: Policy) -> None:
        if lm is None:
            raise BadInput("a chain drafter needs a draft model: set model=<pair> with a draft")
        self.lm, self.policy = lm, policy
        self.models = [lm]

    def reset(self) -> None:
        self.lm.reset()
        self.policy.reset()

    def propose(self, ctx: Context) -> Draft:
        ids = ctx.tokens.tolist()
        layers = (-1,) if self.policy.wants_hidden else ()  # the draft's last hidden state
        # 1. Reconcile the draft cache with the committed tokens; the last row scores the root.
        out = self.lm.reconcile(ids, hidden_layers=layers)
        tokens: list[int] = []
        q_rows: list[torch.Tensor] = []
        # Greedy with a policy that ignores q: the proposals are point masses on the argmax, so
        # the draft carries q = None (the verifiers' point-mass rule gives the same verdicts as
        # one-hot rows) and no [V] row is built per token.
        sampling = ctx.sampling
        greedy = sampling.temperature == 0
        point_masses = greedy and not self.policy.wants_q
        while len(tokens) < self._limit(ctx):
            # 2. Warp the draft logits of the last position into q for the next token (greedy:
            #    the argmax, found once and shared with warp).
            row = out.logits[-1:]  # [1, V]
            top = argmax_rows(row) if greedy else None  # [1]
            q = None if point_masses else warp(row, sampling, top)[0]  # [V]
            hidden = out.hidden[-1, 0] if layers else None  # [H]
            # 3. Ask the policy, then sample the token through the shared coins (a point mass
            #    draws no coin: greedy takes the argmax).
            if not self.policy.should_draft(DraftState(len(tokens), q, hidden, row[0], sampling)):
                break
            tokens.append(int(top) if top is not None else ctx.coins.categorical(q))
            if q is not None:
                q_rows.append(q)
            # 4. Score the new token unless the draft is full (the policy may have lowered its
            #    limit) or the token is a stop id: in both cases its q row would be unused.
            if tokens[-1] in ctx.stop_ids:
                break
            if len(tokens) < self._limit(ctx):
                out = self.lm.forward(torch.tensor(tokens[-1:]), hidden_layers=layers)
        q_all = None
        if not point_masses:
            vocab = out.logits.shape[-1]
            q_rows.append(torch.zeros(vocab, dtype=out.logits.dtype, device=out.logits.device))
            q_all = torch.stack(q_rows)  # [k+1, V]; the last row is unused (leaf)
        return Draft.chain(ctx.root, torch.tensor(tokens, dtype=torch.long), q_all)

    def _limit(self, ctx: Context) -> int:
        return min(self.policy.limit(), ctx.budget - 1)

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        self.policy.observe(draft.num_drafted, verdict.num_accepted)
