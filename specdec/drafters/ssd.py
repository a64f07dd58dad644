"""SSD / SAGUARO: pre-draft the next step for anticipated verdicts while the target verifies.

Kumar et al. 2025, "Speculative Speculative Decoding" (ICLR 2026; public code
github.com/tanishqkumar/ssd). Symbols: ``γ`` = the chain length (``drafter.policy``), ``K`` = the
length of the draft being verified, outcome ``(k, y)`` = ``k`` tokens accepted then ``y``
recovered/bonus, ``F_k`` = fan-out, ``B`` = budget, ``r`` = miss exponent, ``C`` / ``F`` =
SAGUARO's downweight and top count.

Per decoding step ``t`` (``specdec.drafters.ahead`` runs the job; ``ssd_cache`` builds it):

1. **propose**: a *hit* last step left a chain in hand: propose it, with no serial draft work.
   Otherwise (first step, a *miss*) the **fallback** drafts: ``jit`` (a fresh serial chain of
   ``γ`` tokens on the main lane, the shared coins) or ``none`` (the root alone, an AR step);
   ``backup=auto`` picks by the rule of ``ssd_fanout`` from the measured miss rate, acceptance
   and ``cost_ratio``.
2. The draft is fixed: submit the speculation job. ``F_k`` comes from ``FanOut`` (the run's
   acceptance histogram, ``F_k ∝ P(k)^{1/(1+r)}``, ``Σ F_k = B``); the job drafts a chain of
   ``L_k = min(γ, budget after the outcome − 1)`` tokens after each candidate.
3. **observe**: take the cache; the verdict's ``(k, y)`` in it is a hit (next step proposes that
   chain), else a miss. Every other chain is rolled back.

**Exactness (any temperature, any fan-out, SAGUARO on or off).** Tokenwise verification emits
the target's next-token law whenever the proposed draft's tokens are drawn one by one from the
``q`` rows it carries, given the committed prefix, with randomness independent of the verifier's
(Leviathan et al.; ``tests/verifiers/test_exact_tokenwise.py``). ``q`` here is SAGUARO's ``q' =
σ_{F,C}(q)``, a function of the prefix only, used for sampling and carried in ``Draft.q``, so the
verifier's ratio test sees exactly the law the tokens came from. What must hold is that the
chain proposed after a hit is such a fresh draft. The candidate set ``S_k`` (the top-``F_k``
draft logits at slot ``k``, minus ``s_{k+1}``) and ``F_k`` are functions of the committed
prefix, the current draft and past counts -- all fixed before the verdict is drawn. The
chain for ``(k, c)`` is drawn from ``q'`` after
``prefix + s_{1..k} + c`` with its own stream ``fork((step, len(prefix), k, c))``, which the
verifier never reads and no other chain shares. So, given the pre-verdict history, the chain
tokens are independent of the verdict ``(k, y)`` (drawn from the main stream), and conditioning on
``(k, y) = (k, c)`` -- the hit -- leaves chain ``(k, c)`` distributed as a fresh ``q'`` chain
after the new committed prefix ``prefix + s_{1..k} + c``. Its length ``L_k`` is a function of the
past; stopping after a stop id is the same rule a fresh draft follows. On a miss, ``jit`` draws a
fresh chain from the main stream *after* the verdict, and ``none`` proposes nothing; which one is
a function of past counts. Unused chains are dropped and their streams never reused (drawing
from a fork never moves the main stream the verifier uses). Hence every
step's proposed draft is a valid draft given the committed prefix, and by induction over steps
the output has the target's law. ``tests/drafters/test_ssd.py`` proves it by exact enumeration
through ``engine.generate`` (hit, miss, ``jit`` and ``none`` fallbacks, SAGUARO on and off).

**What differs from the public code, and why.** (a) Its miss path without JIT accepts the
leading draft tokens that equal the target's argmax and samples ``p`` after them: biased at
T > 0 when a random backup token happens to equal the argmax. Here a miss never
changes the verifier: the fallback is a fresh chain or the root alone, both verified by the
unchanged tokenwise rule, and the choice between them is computed, not a flag. (b) Fan-out is
computed from measured acceptance, not typed lists. (c) SAGUARO rescales the paper's top-``F``
(the code: top-``F+1``). (d) One sequence (batch 1), so the batch-aware part of the fallback
reduces to the per-miss rule.

Counters (``specdec.metrics``): ``hits`` / ``misses`` (cache lookups: ``hit_rate`` is the cache
hit rate), ``draft_tokens`` (every token the draft made: JIT chains and every cached chain),
``rolled_back`` (chains not used, and proposed tokens the verifier rejected), ``chains`` (chains
pre-drafted), ``jit_steps`` and ``root_steps`` (fallback drafts: a chain / the root alone).
"""

from __future__ import annotations

from collections import Counter
from functools import partial

from specdec.core import Context, Draft, Drafter, Verdict
from specdec.drafters.ahead import Ahead
from specdec.drafters.limits import check_nodes
from specdec.drafters.policies import Policy
from specdec.drafters.saguaro import check_saguaro
from specdec.drafters.ssd_cache import Key, Plan, jit_chain, speculate
from specdec.drafters.ssd_fanout import FanOut
from specdec.errors import BadInput
from specdec.lm import CachedLM
from specdec.metrics import DRAFT_TOKENS, HITS, MISSES, ROLLED_BACK

BACKUPS = ("auto", "jit", "none")


class SsdDrafter(Drafter):
    """Speculative speculative decoding with SAGUARO's cache shape and sampling.

    Args:
        lm: the draft model with its cache (the worker's while a job runs).
        policy: ``policy.limit()`` is the chain length ``γ`` (``Fixed``).
        budget: ``B``, candidate tokens pre-drafted per step (``Σ F_k``).
        r: the miss-rate exponent of the fan-out rule.
        saguaro_c: SAGUARO's ``C`` in (0, 1] (1: plain ``q``).
        saguaro_top: SAGUARO's ``F``, the top tokens downweighted.
        backup: the miss path: ``auto`` (rule of ``ssd_fanout``), ``jit`` or ``none``.
        cost_ratio: one draft forward / one target forward, for the ``auto`` rule.
        prior_accept, prior_miss, prior_weight: the fan-out and fallback priors.
        mode: ``auto`` / ``thread`` / ``inline`` (``drafters.ahead``).
        lane: the worker's lane in the forward log.
    """

    def __init__(
        self,
        lm: CachedLM,
        policy: Policy,
        *,
        budget: int = 6,
        r: float = 0.5,
        saguaro_c: float = 1.0,
        saguaro_top: int = 1,
        backup: str = "auto",
        cost_ratio: float = 0.1,
        prior_accept: float = 0.7,
        prior_miss: float = 0.3,
        prior_weight: float = 8.0,
        mode: str = "auto",
        lane: str = "ssd",
    ) -> None:
        if lm is None:
            raise BadInput("ssd needs a draft model: set model=<pair> with a draft")
        if backup not in BACKUPS:
            raise BadInput(
                f"drafter.backup={backup!r} is not a miss path; use one of {list(BACKUPS)}"
            )
        if cost_ratio < 0:
            raise BadInput(
                f"drafter.cost_ratio must be >= 0 (draft / target forward time), got {cost_ratio}"
            )
        check_saguaro(saguaro_top, saguaro_c)
        self.lm, self.policy, self.models = lm, policy, [lm]
        self.fan = FanOut(
            budget, r, prior_accept=prior_accept, prior_miss=prior_miss, prior_weight=prior_weight
        )
        gamma = policy.longest()  # each candidate pre-drafts a chain of up to gamma tokens
        check_nodes(
            1 + budget * (1 + gamma),
            what=f"drafter.budget={budget} candidates with chains of {gamma}",
            fix="drafter.budget or the policy's draft length",
        )
        self.top, self.c, self.backup, self.cost_ratio = saguaro_top, saguaro_c, backup, cost_ratio
        self.ahead: Ahead[dict[Key, Draft]] = Ahead(
            lane, device=lm.device, threads=lm.threads, mode=mode
        )
        self.reset()

    def reset(self) -> None:
        self.ahead.discard()  # a generation that failed mid-step may leave a job running
        self.lm.reset()
        self.policy.reset()
        self.fan.reset()
        self._next: Draft | None = None
        self._lengths: list[int] = []
        self._counts: Counter[str] = Counter()

    def _fallback(self, ctx: Context, gamma: int) -> Draft:
        """The miss path: a fresh serial chain (``jit``) or the root alone (``none``)."""
        jit = self.backup == "jit" or (
            self.backup == "auto" and self.fan.use_jit(gamma, self.cost_ratio)
        )
        if gamma < 1:  # the last token of the budget: nothing to draft
            return Draft.empty(ctx.root)
        if not jit:
            self._counts["root_steps"] += 1
            return Draft.empty(ctx.root)
        self._counts["jit_steps"] += 1
        draft = jit_chain(
            self.lm,
            ctx.tokens.tolist(),
            gamma,
            ctx.sampling,
            self.top,
            self.c,
            ctx.coins,
            ctx.stop_ids,
        )
        self._counts[DRAFT_TOKENS] += draft.num_drafted
        return draft

    def propose(self, ctx: Context) -> Draft:
        gamma = self.policy.limit()
        # 1. A hit's chain, or the fallback.
        draft, self._next = self._next, None
        if draft is None:
            draft = self._fallback(ctx, min(gamma, ctx.budget - 1))
        assert int(draft.tokens[0]) == ctx.root, "a cached chain must start with the emitted token"
        # 2. Plan the cache: chain lengths after each outcome k, candidates per outcome.
        s = draft.tokens[1:].tolist()  # [K]
        K, V = len(s), self.lm.vocab_size
        ended = [any(t in ctx.stop_ids for t in s[:k]) for k in range(K + 1)]
        self._lengths = [
            0 if ended[k] else max(0, min(gamma, ctx.budget - (k + 1) - 1)) for k in range(K + 1)
        ]
        caps = [(V - 1 if k < K else V) if self._lengths[k] else 0 for k in range(K + 1)]
        fanout = self.fan.fanout(K, caps)
        if sum(fanout):
            # 3. Start the job (its coins: a stream of its own per step; a turn has its own root).
            plan = Plan(
                ids=ctx.tokens.tolist(),
                draft=s,
                fanout=fanout,
                lengths=self._lengths,
                coins=ctx.coins.fork(("ssd", ctx.step, int(ctx.tokens.numel()))),
                stop_ids=ctx.stop_ids,
            )
            self.ahead.submit(
                ctx.step, partial(speculate, self.lm, plan, ctx.sampling, self.top, self.c)
            )
        return draft

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        # 1. Join the worker (raises BackgroundError naming the step if its job failed).
        cache = self.ahead.take() or {}
        self.policy.observe(draft.num_drafted, verdict.num_accepted)
        self.fan.observe(draft.num_drafted, verdict.num_accepted)
        made = sum(d.num_drafted for d in cache.values())
        self._counts["chains"] += len(cache)
        self._counts[DRAFT_TOKENS] += made
        rolled = draft.num_drafted - verdict.num_accepted + made
        # 2. Look the verdict up when the generation goes on and the next step would draft.
        k, y = verdict.num_accepted, verdict.token
        if self._lengths[k] > 0 and y not in ctx.stop_ids:
            hit = (k, y) in cache
            self.fan.cache(hit)
            self._counts[HITS if hit else MISSES] += 1
            if hit:
                self._next = cache[(k, y)]
                rolled -= self._next.num_drafted
        self._counts[ROLLED_BACK] += rolled

    def counters(self) -> dict[str, int]:
        return dict(self._counts)
