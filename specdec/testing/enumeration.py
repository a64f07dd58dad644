"""Exact enumeration of every random branch of a computation (the losslessness harness).

``EnumerationCoins`` replays a script of choices: at each ``bernoulli``/``categorical`` call past
the
end of the script it takes the first option with non-zero probability and records the others.
``enumerate_outcomes(fn)`` re-runs ``fn(coins)`` once per execution path (depth-first over the
recorded alternatives), so every path is visited exactly once with its exact probability (the
product of the chosen options' probabilities). In float64 the probabilities of all paths sum to 1
up to rounding, and the distribution of ``fn``'s output is exact to ~1e-15.

Use it with table-driven LMs (``testing.table_lm``) through the real ``engine.generate`` loop to
prove a verifier lossless: the output distribution must equal the target's autoregressive joint.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable

import torch


class EnumerationCoins:
    """Coins that follow a script of option indices and record every unexplored option.

    Args:
        script: option index to take at each call (calls beyond it take option 0).
    """

    def __init__(self, script: list[int]) -> None:
        self.script = script
        self.options: list[int] = []  # number of options at each call
        self.choices: list[int] = []
        self.prob = 1.0

    def _choose(self, weights: list[tuple[object, float]]) -> object:
        weights = [(v, w) for v, w in weights if w > 0]
        assert weights, "a random choice with no option of positive probability"
        k = len(self.choices)
        idx = self.script[k] if k < len(self.script) else 0
        self.options.append(len(weights))
        self.choices.append(idx)
        value, w = weights[idx]
        self.prob *= w
        return value

    def bernoulli(self, prob: float) -> bool:
        prob = min(1.0, max(0.0, float(prob)))
        return bool(self._choose([(True, prob), (False, 1.0 - prob)]))

    def categorical(self, probs: torch.Tensor) -> int:
        assert probs.dim() == 1
        total = float(probs.sum())
        assert abs(total - 1.0) < 1e-9, f"categorical probabilities sum to {total}"
        return int(self._choose([(v, float(w)) for v, w in enumerate(probs.tolist())]))


def enumerate_outcomes(
    fn: Callable[[EnumerationCoins], Hashable], *, max_paths: int = 1_000_000
) -> dict[Hashable, float]:
    """Exact output distribution of ``fn`` over all its random branches.

    Args:
        fn: a deterministic function of its coins returning a hashable outcome.
        max_paths: safety bound on the number of execution paths.

    Returns:
        ``{outcome: probability}``.
    """
    dist: dict[Hashable, float] = defaultdict(float)
    stack: list[list[int]] = [[]]
    paths = 0
    while stack:
        script = stack.pop()
        coins = EnumerationCoins(script)
        outcome = fn(coins)
        dist[outcome] += coins.prob
        paths += 1
        assert paths <= max_paths, "too many execution paths; shrink the instance"
        # every call past the script took option 0: schedule its alternatives
        for depth in range(len(script), len(coins.choices)):
            for alt in range(1, coins.options[depth]):
                stack.append(coins.choices[:depth] + [alt])
    return dict(dist)


def max_abs_error(a: dict[Hashable, float], b: dict[Hashable, float]) -> float:
    """Largest absolute difference between two distributions over the union of their supports."""
    keys = set(a) | set(b)
    return max(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys)


def total_variation(a: dict[Hashable, float], b: dict[Hashable, float]) -> float:
    """Total-variation distance ½ Σ |a − b|."""
    keys = set(a) | set(b)
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys)
