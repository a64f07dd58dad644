"""PEARL: the draft model runs one block ahead, on a worker, while the target verifies.

Liu et al. 2025, "PEARL: Parallel Speculative Decoding with Adaptive Draft Length" (ICLR'25);
the public code is the ``para_sd`` mode of SpecBranch's repository
(github.com/Sylvan820/Specbranch). Symbols: γ = the window, tokens the draft makes
while the target runs one forward (``drafter.policy.gamma``; the paper sets γ ≈ c = target
forward time / draft forward time); PRE / POST = the paper's pre-verify and post-verify modes.

On this engine (``specdec.engine``: each step verifies one draft rooted at the last committed
token, and the verifier emits the accepted tokens plus one recovered-or-bonus token) PEARL is a
drafter whose worker (``specdec.drafters.ahead``) drafts the next block during the target's
forward, *assuming the current draft is accepted in full*:

1. **PRE** (first step, and every step after a miss): propose the root alone. The target scores
   it (one token, as in PEARL's pre-verify forward over the verified prefix) and the verifier
   draws the next token ``y ~ p``; meanwhile the worker drafts ``e_1..e_γ`` after the root.
   With ``pre_draft = k > 0`` (not in the paper) the main lane first drafts ``k`` tokens
   serially and proposes them: the target verifies them (tokenwise) and draws a bonus, and the
   worker drafts after them. It costs ``k`` serial draft forwards per PRE step and lets a PRE
   step emit up to ``k + 1`` tokens; the hand-off below is unchanged.
2. **POST** (after a hit): propose the block ``[y = e_1; e_2..e_γ]`` the worker made last step,
   with no draft work on the main lane; the target verifies ``e_2..e_γ`` and draws the bonus while
   the worker drafts the next block after ``e_γ``.
3. **Hand-off** (``observe``): the block is kept (a *hit*) iff the verdict accepted every proposed
   token and its recovered-or-bonus token equals the block's first token ``e_1``; otherwise it is
   rolled back (a *miss*) and the next step is PRE.

The adaptive draft length of the title is this schedule: a run of hits keeps the target verifying
γ − 1 tokens per forward while the draft never waits; the first rejection drops the pipelined work
and restarts from a PRE step, so the draft length follows the acceptance of the moment.

**Lossless at every temperature.** Verification is the configured verifier (tokenwise) on the
draft actually proposed, with the ``q`` each token was drawn from. A kept block's tokens
``e_2..e_γ`` were drawn from the draft's chain given ``prefix + e_1`` with the worker's own coins,
after ``e_1``; conditioning on the hit (``e_1`` equal to the token the verifier drew with the main
coins) leaves them distributed as a fresh chain draft after ``y``. So each proposed draft is a
valid draft given the committed prefix, its length a function of the past, and tokenwise
verification emits the target's law (``tests/drafters/test_pearl.py`` enumerates it exactly).

Difference from the paper at T > 0: PEARL verifies ``e_1`` by rejection against the target's
distribution at the bonus slot (kept with probability Σ min(p, q)); here the draft is fixed
before the target's forward and the verifier draws the bonus itself, so the block is kept only if
the draw equals ``e_1`` (probability Σ p·q). At T = 0 (the papers' runs) both are "e_1 = argmax p".
The worker's randomness comes from ``coins.fork(("pearl", step, len(tokens)))``, unique within
one ``generate``; each turn of a multi-turn prompt draws from its own stream
(``sampling.turn_coins``), since two turns can have the same length and step.

Counters (``counters()``, summed into records and summaries, ``specdec.metrics``): ``pre_steps``,
``post_steps``, ``hits``, ``misses`` (blocks kept / rolled back), ``draft_tokens`` (every token the
draft made) and ``rolled_back`` (drafted tokens discarded: a missed block, and proposed tokens the
verifier rejected), so ``rollback_rate = rolled_back / draft_tokens`` and
``hit_rate = hits / (hits + misses)``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from functools import partial

import torch

from specdec.core import Context, Draft, Drafter, Verdict
from specdec.drafters.ahead import Ahead
from specdec.drafters.model import ModelDrafter
from specdec.drafters.policies import Fixed, Policy
from specdec.errors import BadInput
from specdec.lm import CachedLM
from specdec.metrics import DRAFT_TOKENS, HITS, MISSES, ROLLED_BACK

#: the fewest tokens a block must be allowed so that a hit saves a draft (e_1 and e_2)
MIN_BLOCK = 2


class PearlDrafter(Drafter):
    """PEARL's pre-verify / post-verify schedule with a background draft worker.

    Args:
        lm: the draft model with its cache (the worker's; the main lane's only in PRE steps with
            ``pre_draft``, before the worker starts).
        policy: the block length γ (``Fixed``; an adaptive policy also works, lossless alike).
        pre_draft: tokens a PRE step drafts serially on the main lane (0: PEARL's schedule).
        mode: ``auto`` (a worker when the configuration can overlap, else inline), ``thread``
            (worker thread / CUDA side stream) or ``inline`` (serial; exact tests).
        lane: the worker's lane in the forward log.
    """

    def __init__(
        self,
        lm: CachedLM,
        policy: Policy,
        *,
        pre_draft: int = 0,
        mode: str = "auto",
        lane: str = "pearl",
    ) -> None:
        if pre_draft < 0:
            raise BadInput(
                f"drafter.pre_draft must be >= 0 (0: PEARL's one-token PRE step), got {pre_draft}"
            )
        self.chain = ModelDrafter(lm, policy)  # the worker's chain drafting
        # the main lane's PRE draft (same model and cache, used only while the worker is idle)
        self.pre = ModelDrafter(lm, Fixed(pre_draft)) if pre_draft else None
        self.models = [lm]
        self.ahead: Ahead[Draft] = Ahead(lane, device=lm.device, threads=lm.threads, mode=mode)
        self._next: Draft | None = None
        self._counts: Counter[str] = Counter()

    def reset(self) -> None:
        self.ahead.discard()  # a generation that failed mid-step may leave a job running
        self.chain.reset()
        self._next, self._counts = None, Counter()

    def propose(self, ctx: Context) -> Draft:
        # 1. POST: the block the worker made last step (it hit); PRE: the root alone, or the
        #    main lane's serial pre-draft.
        draft, self._next = self._next, None
        self._counts["pre_steps" if draft is None else "post_steps"] += 1
        if draft is None and self.pre is not None:
            draft = self.pre.propose(ctx)
            self._counts[DRAFT_TOKENS] += draft.num_drafted
        elif draft is None:
            draft = Draft.empty(ctx.root)
        assert int(draft.tokens[0]) == ctx.root, "a kept block must start with the emitted token"
        # 2. Start the worker on the continuation a full acceptance gives; its budget is the next
        #    step's + 1, so its block never holds more than the next step may emit. No block when
        #    a hit could not save a draft, or when accepting the draft ends the generation.
        budget = ctx.budget - draft.num_drafted
        tail = draft.tokens[1:]  # [k]
        if budget > MIN_BLOCK and not ctx.stop_ids.intersection(tail.tolist()):
            ahead = replace(
                ctx,
                tokens=torch.cat([ctx.tokens, tail]),
                budget=budget,
                coins=ctx.coins.fork(("pearl", ctx.step, int(ctx.tokens.numel()))),
                target_features=None,
            )
            self.ahead.submit(ctx.step, partial(self.chain.propose, ahead))
        return draft

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        # 1. Join the worker (raises BackgroundError naming the step if its job failed).
        block = self.ahead.take()
        self.chain.observe(ctx, draft, verdict)  # the policy sees each proposed draft's verdict
        # 2. Proposed tokens the verifier did not accept are rolled back.
        rolled = draft.num_drafted - verdict.num_accepted
        if block is not None and block.num_drafted:
            # 3. Hit: everything accepted and the emitted token is the block's first (e_1).
            self._counts[DRAFT_TOKENS] += block.num_drafted
            full = verdict.num_accepted == draft.num_drafted
            if full and int(block.tokens[1]) == verdict.token:
                self._counts[HITS] += 1
                q = None if block.q is None else block.q[1:]  # [j, V]: rows of e_2..e_j, leaf
                self._next = Draft.chain(verdict.token, block.tokens[2:], q)
            else:  # 4. Miss: the whole block is rolled back.
                self._counts[MISSES] += 1
                rolled += block.num_drafted
        self._counts[ROLLED_BACK] += rolled

    def counters(self) -> dict[str, int]:
        return dict(self._counts)
