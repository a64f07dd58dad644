"""Exact enumeration of every random branch of a computation (the losslessness harness).

``EnumerationCoins`` replays a script of choices: at each ``bernoulli``/``categorical`` call past
the end of the script it takes the first option with non-zero probability and records the others.
``enumerate_outcomes(fn)`` re-runs ``fn(coins)`` once per execution path (depth-first over the
recorded alternatives), so every path is visited exactly once with its exact probability (the
product of the chosen options' probabilities). In float64 the probabilities of all paths sum to 1
up to rounding, and the distribution of ``fn``'s output is exact to ~1e-15.

Forks (``Coins.fork``, for background and ahead-of-time drafting): a child records its choices
into the same execution path as its parent, and its probabilities multiply into the same path
probability, so every branch of every stream is enumerated. Calls are numbered in the order they
happen across all streams, which is deterministic only when ``fn`` runs background work
synchronously: **under the harness a drafter's worker must run inline (or be joined before the
next draw elsewhere), never in a free-running thread.** Each replayed call is checked to come from
the same stream with the same number of options as when it was recorded, so a nondeterministic
order fails loudly instead of giving a wrong law. Forking one key twice from one stream raises
``ValueError``: production coins would give both children the same draws, which independent
enumeration cannot represent. Keys are validated exactly as ``sampling.canonical_key`` does.

Use it with table-driven LMs (``testing.table_lm``) through the real ``engine.generate`` loop to
prove a verifier lossless: the output distribution must equal the target's autoregressive joint.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Hashable

import torch

from specdec.sampling import canonical_key

#: what a call is checked against on replay: (stream of canonical fork keys, number of options)
Signature = tuple[tuple[str, ...], int]


class _Path:
    """The choices of one execution path, shared by a root ``EnumerationCoins`` and its forks."""

    def __init__(self, script: list[int], expected: list[Signature]) -> None:
        self.script, self.expected = script, expected
        self.options: list[int] = []  # number of options at each call
        self.choices: list[int] = []
        self.signatures: list[Signature] = []
        self.prob = 1.0


class EnumerationCoins:
    """Coins that follow a script of option indices and record every unexplored option.

    Args:
        script: option index to take at each call (calls beyond it take option 0).
        expected: signature of each scripted call when it was recorded (checked on replay).
    """

    def __init__(self, script: list[int], expected: list[Signature] | None = None) -> None:
        self._path = _Path(script, expected or [])
        self.stream: tuple[str, ...] = ()  # canonical fork keys from the root to this stream
        self._forked: set[str] = set()

    @property
    def script(self) -> list[int]:
        return self._path.script

    @property
    def options(self) -> list[int]:
        return self._path.options

    @property
    def choices(self) -> list[int]:
        return self._path.choices

    @property
    def signatures(self) -> list[Signature]:
        return self._path.signatures

    @property
    def prob(self) -> float:
        return self._path.prob

    def _choose(self, weights: list[tuple[object, float]]) -> object:
        weights = [(v, w) for v, w in weights if w > 0]
        assert weights, "a random choice with no option of positive probability"
        path, k = self._path, len(self._path.choices)
        signature = (self.stream, len(weights))
        if k < len(path.expected) and path.expected[k] != signature:
            raise AssertionError(
                f"enumeration is not deterministic: call {k} was {path.expected[k]} (stream, "
                f"options) when recorded and is {signature} on replay; run background drafting "
                f"synchronously under the harness"
            )
        idx = path.script[k] if k < len(path.script) else 0
        path.options.append(len(weights))
        path.choices.append(idx)
        path.signatures.append(signature)
        value, w = weights[idx]
        path.prob *= w
        return value

    def bernoulli(self, prob: float) -> bool:
        prob = min(1.0, max(0.0, float(prob)))
        return bool(self._choose([(True, prob), (False, 1.0 - prob)]))

    def categorical(self, probs: torch.Tensor) -> int:
        assert probs.dim() == 1
        total = float(probs.sum())
        assert abs(total - 1.0) < 1e-9, f"categorical probabilities sum to {total}"
        return int(self._choose([(v, float(w)) for v, w in enumerate(probs.tolist())]))

    def fork(self, key: Hashable) -> EnumerationCoins:
        """A child stream recording into this path (see the module docstring).

        Raises:
            TypeError: for a key production coins would refuse.
            ValueError: when ``key`` was already forked from this stream.
        """
        canon = canonical_key(key)
        if canon in self._forked:
            raise ValueError(
                f"Coins.fork({key!r}) called twice on one stream: production coins would give "
                f"both children the same draws; make fork keys unique per use (e.g. add a step)"
            )
        self._forked.add(canon)
        child = copy.copy(self)  # shares the path
        child.stream, child._forked = (*self.stream, canon), set()
        return child


def enumerate_outcomes(
    fn: Callable[[EnumerationCoins], Hashable], *, max_paths: int = 1_000_000
) -> dict[Hashable, float]:
    """Exact output distribution of ``fn`` over all its random branches (forks included).

    Args:
        fn: a deterministic function of its coins returning a hashable outcome; any background
            work it starts must draw in a deterministic order (run it synchronously).
        max_paths: safety bound on the number of execution paths.

    Returns:
        ``{outcome: probability}``.
    """
    dist: dict[Hashable, float] = defaultdict(float)
    stack: list[tuple[list[int], list[Signature]]] = [([], [])]
    paths = 0
    while stack:
        script, expected = stack.pop()
        coins = EnumerationCoins(script, expected)
        outcome = fn(coins)
        assert len(coins.choices) >= len(script), "a replayed path made fewer random calls"
        dist[outcome] += coins.prob
        paths += 1
        assert paths <= max_paths, "too many execution paths; shrink the instance"
        # every call past the script took option 0: schedule its alternatives
        for depth in range(len(script), len(coins.choices)):
            for alt in range(1, coins.options[depth]):
                stack.append((coins.choices[:depth] + [alt], coins.signatures[: depth + 1]))
    return dict(dist)


def max_abs_error(a: dict[Hashable, float], b: dict[Hashable, float]) -> float:
    """Largest absolute difference between two distributions over the union of their supports."""
    keys = set(a) | set(b)
    return max(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys)


def total_variation(a: dict[Hashable, float], b: dict[Hashable, float]) -> float:
    """Total-variation distance ½ Σ |a − b|."""
    keys = set(a) | set(b)
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys)


def truncate_at_stop(dist: dict[tuple, float], stops: set[int]) -> dict[tuple, float]:
    """The law of sequences cut after their first stop id (what the engine emits), from the law
    of uncut sequences (e.g. ``table_lm.ar_joint``)."""
    out: dict[tuple, float] = defaultdict(float)
    for seq, prob in dist.items():
        cut = next((i for i, t in enumerate(seq) if t in stops), None)
        out[seq if cut is None else seq[: cut + 1]] += prob
    return dict(out)
