"""Test doubles for the drafter contract's wave-2 hooks: method counters and background work.

``CountingDrafter`` is a chain drafter (``drafters.ModelDrafter``) that reports counters
(``Drafter.counters``). ``BackgroundDrafter`` also guesses, on a worker thread running on its own
lane (``forwards.lane``) while the target verifies, the bonus token a fully accepted draft would
get (a one-token version of PEARL's post-verify, Liu et al. 2025), with its own draft cache and a
forked coin stream (``Coins.fork``), and joins the worker in ``observe``. The guess never changes
what is emitted; it only exercises the execution model: overlapped forwards in the log, step
stamps, reproducible background randomness and counters (``ahead_hits`` / ``ahead_misses``).
"""

from __future__ import annotations

import threading
from collections import Counter

from specdec.coins import Coins
from specdec.core import LM, Context, Draft, Verdict
from specdec.drafters.model import ModelDrafter
from specdec.drafters.policies import Policy
from specdec.forwards import lane
from specdec.sampling import Sampling, warp


class CountingDrafter(ModelDrafter):
    """A chain drafter counting its proposals and its fully accepted drafts."""

    def __init__(self, lm: LM, policy: Policy) -> None:
        super().__init__(lm, policy)
        self._counts: Counter[str] = Counter()

    def reset(self) -> None:
        super().reset()
        self._counts = Counter()

    def propose(self, ctx: Context) -> Draft:
        self._counts["proposals"] += 1
        return super().propose(ctx)

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        super().observe(ctx, draft, verdict)
        if draft.num_drafted and verdict.num_accepted == draft.num_drafted:
            self._counts["full_accepts"] += 1

    def counters(self) -> dict[str, int]:
        return dict(self._counts)


class BackgroundDrafter(CountingDrafter):
    """A chain drafter whose worker guesses the bonus token while the target verifies.

    Args:
        lm: the draft model the chain is drafted with (main lane).
        ahead: a second cache of a draft model for the worker (its own KV cache).
        policy: as ``ModelDrafter`` (the worker warps with the step's ``ctx.sampling``).
        lane_name: the worker's lane in the forward log.
    """

    def __init__(self, lm: LM, ahead: LM, policy: Policy, lane_name: str = "worker") -> None:
        super().__init__(lm, policy)
        self.ahead, self.lane_name = ahead, lane_name
        self.models = [lm, ahead]
        self._worker: threading.Thread | None = None
        self._guess: int | None = None

    def propose(self, ctx: Context) -> Draft:
        draft = super().propose(ctx)
        # Start the worker on the draft's continuation; it runs during the target's forward.
        ids = ctx.tokens.tolist() + draft.tokens[1:].tolist()
        coins = ctx.coins.fork(("ahead", ctx.step))  # independent of the main stream's position
        self._worker = threading.Thread(
            target=self._run, args=(ids, coins, ctx.sampling), daemon=True
        )
        self._worker.start()
        return draft

    def _run(self, ids: list[int], coins: Coins, sampling: Sampling) -> None:
        with lane(self.lane_name):
            logits = self.ahead.reconcile(ids).logits[-1:]  # [1, V]
        self._guess = coins.categorical(warp(logits, sampling)[0])

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        # 1. Join the worker: the engine reads the forward logs right after observe.
        assert self._worker is not None, "observe without propose"
        self._worker.join()
        self._worker = None
        super().observe(ctx, draft, verdict)
        # 2. A guess counts only when the draft was fully accepted (the bonus position).
        if verdict.num_accepted == draft.num_drafted:
            hit = verdict.token == self._guess
            self._counts["ahead_hits" if hit else "ahead_misses"] += 1
