"""The serving-time bandit's rule and its reward clock (used by ``drafters.specblock_bandit``).

**Rule: discounted UCB** (D-UCB, Garivier & Moulines, "On upper-confidence bound policies for
switching bandit problems", ALT 2011), one independent bandit per context bucket. In a context,
after its ``t``-th step, with discount ``γ`` (``discount``), each arm ``i`` has the discounted pull
count and reward sum

    N_i = Σ_s γ^(t-s) 1[i_s = i],        S_i = Σ_s γ^(t-s) r_s 1[i_s = i],

and the next step pulls ``argmax_i S_i / (N_i · r_max) + c · sqrt(log max(n, 1) / N_i)`` with
``n = Σ_i N_i`` and ``c`` = ``exploration`` (every arm is pulled once first, in order; ties go to
the lower index). ``r_max`` is the largest reward seen so far (all contexts), so the rewards the
index compares lie in ``[0, 1]`` (UCB1's scale) whatever the unit of the raw reward. ``γ = 1`` is
UCB1 on those normalised rewards. Why discounting: the reward (tokens per second) drifts with the
prompt (acceptance changes with the topic and position in the answer) and with the machine's load
(forward times on a shared CPU), i.e. the problem is non-stationary; ``1 / (1 - γ)`` steps is the
memory (100 at the default 0.99).

Optional uniform exploration (``explore = ε``): with probability ε the arm is drawn uniformly at
random instead, from the ``Coins`` handed to ``choose`` (the drafter forks the step's coins, so the
draw is independent of the verifier's and the exact enumeration covers it).

**Reward clock** (``StepClock``): a step's time is the price of its model forwards only -- the
drafter's draft forwards of the step and the target's verification -- so Python overhead (tree
building, verification arithmetic) never enters it. ``costs = None`` prices each forward at its own
measured seconds (``ForwardRecord.seconds``, the numbers ``bench.costfit`` fits the run's cost
table on); ``costs = {role: [a, b]}`` prices a forward of ``n`` new tokens at ``a + b·n`` seconds
(deterministic: the exact tests, or a reproducible serving run).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import torch

from specdec.coins import Coins
from specdec.errors import BadInput
from specdec.forwards import ForwardRecord


class DiscountedUCB:
    """Discounted UCB over ``arms`` arms, one bandit per context in ``range(contexts)``.

    Args:
        arms: number of arms (>= 1).
        discount: ``γ`` in (0, 1]; 1 = UCB1.
        exploration: ``c`` >= 0, the weight of the confidence bonus.
        explore: ``ε`` in [0, 1], the probability of a uniform random arm (needs coins).
        contexts: number of context buckets (>= 1).
    """

    def __init__(
        self,
        arms: int,
        *,
        discount: float = 0.99,
        exploration: float = 0.5,
        explore: float = 0.0,
        contexts: int = 1,
    ) -> None:
        if arms < 1 or contexts < 1:
            raise ValueError(f"the bandit needs >= 1 arm and >= 1 context, got {arms}, {contexts}")
        if not 0.0 < discount <= 1.0:
            raise BadInput(f"drafter.discount must be in (0, 1] (1 = UCB1), got {discount}")
        if exploration < 0.0 or not 0.0 <= explore <= 1.0:
            raise BadInput(
                f"drafter.exploration must be >= 0 and drafter.explore in [0, 1], "
                f"got {exploration}, {explore}"
            )
        self.arms, self.contexts = int(arms), int(contexts)
        self.discount, self.c, self.eps = float(discount), float(exploration), float(explore)
        self.reset()

    def reset(self) -> None:
        """Forget every reward."""
        self.weight = [[0.0] * self.arms for _ in range(self.contexts)]  # N_i per context
        self.total = [[0.0] * self.arms for _ in range(self.contexts)]  # S_i per context
        self.updates = [0] * self.contexts  # steps seen per context (ages for ``revise``)
        self.scale = 0.0  # r_max

    def index(self, context: int = 0) -> list[float]:
        """The UCB index of every arm in ``context`` (``inf`` for an arm never pulled there)."""
        weight, total = self.weight[context], self.total[context]
        log_n = math.log(max(sum(weight), 1.0))
        scale = self.scale if self.scale > 0 else 1.0
        return [
            math.inf if w <= 0 else s / (w * scale) + self.c * math.sqrt(log_n / w)
            for w, s in zip(weight, total)
        ]

    def choose(self, context: int = 0, coins: Coins | None = None) -> int:
        """The arm to pull next in ``context`` (``coins``: for the ε-uniform draw)."""
        if self.eps > 0:
            if coins is None:
                raise ValueError("explore > 0 draws a random arm: pass the step's coins")
            if coins.bernoulli(self.eps):
                probs = torch.full((self.arms,), 1.0 / self.arms, dtype=torch.float64)  # [A]
                return coins.categorical(probs)
        index = self.index(context)
        return max(range(self.arms), key=lambda i: (index[i], -i))

    def update(self, arm: int, reward: float, context: int = 0) -> None:
        """Discount ``context``'s statistics by ``γ`` and add ``reward`` (>= 0) to ``arm``."""
        if not reward >= 0.0:
            raise ValueError(f"a bandit reward must be >= 0 (tokens per second), got {reward}")
        weight, total = self.weight[context], self.total[context]
        for i in range(self.arms):
            weight[i] *= self.discount
            total[i] *= self.discount
        weight[arm] += 1.0
        total[arm] += reward
        self.updates[context] += 1
        self.scale = max(self.scale, reward)

    def revise(self, arm: int, context: int, at: int, old: float, new: float) -> None:
        """Replace the reward ``old`` that ``arm`` got at ``context``'s update number ``at``
        (``updates[context]`` right after it) by ``new``: its discounted weight today is
        ``γ^(updates - at)``. For costs that become known later (a deferred forward)."""
        age = self.updates[context] - at
        if age < 0 or not new >= 0.0:
            raise ValueError(
                f"cannot revise update {at} of context {context} (at "
                f"{self.updates[context]}) to reward {new}"
            )
        self.total[context][arm] += self.discount**age * (new - old)


class StepClock:
    """Seconds of one step's forwards: measured, or a linear model ``a + b·n`` per role.

    Args:
        costs: ``None`` (each forward's measured ``seconds``) or ``{role: [a, b]}`` in seconds.
    """

    def __init__(self, costs: Mapping[str, Sequence[float]] | None = None) -> None:
        self.costs = (
            None
            if costs is None
            else {str(r): tuple(float(x) for x in ab) for r, ab in costs.items()}
        )
        for role, ab in (self.costs or {}).items():
            if len(ab) != 2 or min(ab) < 0:
                raise BadInput(
                    f"drafter.costs.{role} must be [fixed seconds, seconds per new "
                    f"token], both >= 0, got {list(ab)}"
                )

    def __call__(self, records: Iterable[ForwardRecord]) -> float:
        if self.costs is None:
            return sum(float(r.seconds) for r in records)
        seconds = 0.0
        for r in records:
            if r.role not in self.costs:
                raise BadInput(
                    f"drafter.costs has no price for {r.role!r} forwards; give "
                    f"{r.role}: [fixed seconds, seconds per new token] (priced: "
                    f"{sorted(self.costs)}), or costs: null for measured times"
                )
            a, b = self.costs[r.role]
            seconds += a + b * int(r.new_tokens)
        return seconds
