"""SSD's geometric fan-out, computed from the run's acceptance histogram, and its fallback rule.

Kumar et al. 2025, "Speculative Speculative Decoding" (ICLR 2026; fan-out and fallback). Symbols:
``K`` = the
length of the draft being verified, outcome ``k`` = number of its tokens accepted (0..K),
``P(k)`` = the probability of outcome ``k``, ``F_k`` = how many recovered/bonus tokens the cache
pre-drafts for outcome ``k``, ``B`` = the budget ``Σ_k F_k`` (``drafter.budget``), ``r`` = the
power-law exponent of the miss rate, ``miss(F) ∝ F^{-r}`` (``drafter.r``).

**Fan-out.** Maximising the hit probability ``Σ_k P(k)(1 − miss(F_k))`` under ``Σ_k F_k = B``
gives ``F_k ∝ P(k)^{1/(1+r)}`` (the paper's geometric shape when ``P`` is geometric). The public
code never computes it (hand-typed lists); here ``P_K(k)`` is the run's own histogram of accepted
counts for drafts of length ``K``, smoothed by a documented prior (``prior_weight`` pseudo-steps
of a geometric law with per-token acceptance ``prior_accept``: ``α^k(1−α)`` for ``k < K``,
``α^K`` for ``k = K``), so the first steps use the prior and the histogram takes over as counts
grow. Real shares ``B·w_k/Σw`` (``w_k = P_K(k)^{1/(1+r)}``) are capped at the candidates an outcome
has (``caps[k]``; the surplus goes to the others in proportion) and rounded by largest remainder,
so the integers sum to ``min(B, Σ caps)``.

**Fallback on a miss** (one rule, from measured rates and the backup's cost). ``jit`` drafts a
chain of ``γ`` tokens serially (``γ`` draft forwards, ``γ·c`` in units of one target forward,
``c = drafter.cost_ratio``) and then emits ``E = Σ_{j=0}^{γ} α^j`` tokens per step on average;
``none`` proposes the root alone (no draft cost, one token). Hit steps cost one target forward
and emit ``E`` either way, so with the measured miss rate ``m`` (hits and misses so far, with the
same prior weight on ``prior_miss``) the run emits tokens at ``(1−m)E + mE`` per ``1 + mγc``
(jit) or ``(1−m)E + m`` per ``1`` (none): jit is chosen iff ``E / (1 + mγc) > (1−m)E + m``. The
per-token acceptance ``α`` is the histogram's (accepted / (accepted + rejections)). Both backups
are exact (the jit chain is a fresh draft, the root alone is AR), so the rule only moves speed.
"""

from __future__ import annotations

import math
from collections import defaultdict

from specdec.errors import BadInput


def allocate(weights: list[float], budget: int, caps: list[int]) -> list[int]:
    """Integers ``F_k`` ∝ ``weights`` summing to ``min(budget, Σ caps)`` with ``F_k ≤ caps[k]``.

    Shares above a cap are cut to it and the rest of the budget is shared again among the
    uncapped outcomes (in proportion to their weights); then largest-remainder rounding (ties:
    the smaller ``k``).
    """
    assert len(weights) == len(caps) and budget >= 0
    total = min(budget, sum(caps))
    share = [0.0] * len(weights)
    free = [k for k in range(len(weights)) if caps[k] > 0]
    left = float(total)
    while free and left > 1e-12:
        # 1. Share what is left among the uncapped outcomes; 2. cap, and repeat with the rest.
        wsum = sum(weights[k] for k in free)
        if wsum <= 0:  # no weight left: share evenly
            add = {k: left / len(free) for k in free}
        else:
            add = {k: left * weights[k] / wsum for k in free}
        over = [k for k in free if share[k] + add[k] >= caps[k]]
        if not over:
            for k in free:
                share[k] += add[k]
            break
        for k in over:
            left -= caps[k] - share[k]
            share[k] = float(caps[k])
        free = [k for k in free if k not in over]
    out = [min(caps[k], math.floor(share[k] + 1e-9)) for k in range(len(share))]
    order = sorted(range(len(share)), key=lambda k: (-(share[k] - out[k]), k))
    for k in order:
        if sum(out) >= total:
            break
        if out[k] < caps[k]:
            out[k] += 1
    return out


class FanOut:
    """The running acceptance histogram and the fan-out / fallback it implies.

    Args:
        budget: ``B``, the candidate tokens pre-drafted per step.
        r: the miss-rate exponent (``F_k ∝ P(k)^{1/(1+r)}``); ``r → ∞`` is uniform.
        prior_accept: ``α`` of the geometric prior.
        prior_miss: the prior cache miss rate (for the fallback rule).
        prior_weight: pseudo-steps the priors count for.
    """

    def __init__(
        self,
        budget: int,
        r: float,
        *,
        prior_accept: float = 0.7,
        prior_miss: float = 0.3,
        prior_weight: float = 8.0,
    ) -> None:
        if budget < 1:
            raise BadInput(f"drafter.budget must be >= 1 (candidates per step), got {budget}")
        if r < 0:
            raise BadInput(f"drafter.r must be >= 0 (miss(F) ∝ F^-r), got {r}")
        if not 0.0 < prior_accept < 1.0 or not 0.0 <= prior_miss <= 1.0 or prior_weight <= 0:
            raise BadInput(
                f"the fan-out priors need 0 < drafter.prior_accept < 1, 0 <= "
                f"drafter.prior_miss <= 1 and drafter.prior_weight > 0; got "
                f"{prior_accept}, {prior_miss}, {prior_weight}"
            )
        self.budget, self.r = budget, r
        self.prior_accept, self.prior_miss, self.prior_weight = (
            prior_accept,
            prior_miss,
            prior_weight,
        )
        self.reset()

    def reset(self) -> None:
        self.hist: dict[int, list[int]] = defaultdict(list)  # K -> counts of k = 0..K
        self.hits = self.misses = 0

    # --- updates --------------------------------------------------------------------------------
    def observe(self, drafted: int, accepted: int) -> None:
        """Count one verified draft of ``drafted`` tokens with ``accepted`` of them accepted."""
        if drafted == 0:
            return
        row = self.hist[drafted]
        if not row:
            row.extend([0] * (drafted + 1))
        row[accepted] += 1

    def cache(self, hit: bool) -> None:
        """Count one cache lookup."""
        self.hits += hit
        self.misses += not hit

    # --- estimates ------------------------------------------------------------------------------
    def prior(self, K: int) -> list[float]:
        """The geometric prior over outcomes ``k = 0..K``."""
        a = self.prior_accept
        return [a**k * (1 - a) for k in range(K)] + [a**K]

    def outcome_probs(self, K: int) -> list[float]:
        """``P_K(k)``, ``k = 0..K``: the histogram of drafts of length ``K`` with the prior."""
        counts = self.hist.get(K) or [0] * (K + 1)
        n, w = sum(counts), self.prior_weight
        return [(c + w * p) / (n + w) for c, p in zip(counts, self.prior(K))]

    def fanout(self, K: int, caps: list[int]) -> list[int]:
        """``F_k`` for a draft of length ``K`` (``caps[k]``: candidates outcome ``k`` has)."""
        weights = [p ** (1.0 / (1.0 + self.r)) for p in self.outcome_probs(K)]
        return allocate(weights, self.budget, caps)

    def accept_rate(self) -> float:
        """Per-token acceptance ``α``: accepted / (accepted + rejections), with the prior."""
        acc = rej = 0
        for K, row in self.hist.items():
            acc += sum(k * c for k, c in enumerate(row))
            rej += sum(row[:K])
        a, w = self.prior_accept, self.prior_weight
        return (acc + w * a) / (acc + rej + w)

    def miss_rate(self) -> float:
        w = self.prior_weight
        return (self.misses + w * self.prior_miss) / (self.hits + self.misses + w)

    def use_jit(self, gamma: int, cost_ratio: float) -> bool:
        """The fallback rule of the module docstring: draft a ``gamma`` chain on a miss?"""
        a, m = self.accept_rate(), self.miss_rate()
        emitted = sum(a**j for j in range(gamma + 1))  # E
        return emitted / (1.0 + m * gamma * cost_ratio) > (1.0 - m) * emitted + m
