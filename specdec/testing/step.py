"""Exact law of ONE decoding step through ``engine.generate``, and its analytic completion.

Enumerating whole generations multiplies the branches of every step; a step-level check is far
cheaper and just as strong: every step of the loop is the same process, so a method is lossless iff
"one step, then sample the target autoregressively" reproduces the target's joint. ``one_step``
runs the real ``generate`` loop with a drafter wrapper that drafts once and then proposes empty
drafts while the coins are frozen (argmax, no branching), and returns what the first step emitted.
``complete`` extends the step law to a fixed length with exact target probabilities (no further
enumeration), so ``total_variation(complete(...), ar_joint(...))`` is the exact distance. Forks of
the frozen coins (``Coins.fork``) are frozen too.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence

import torch

from specdec.coins import Coins
from specdec.core import Context, Draft, Drafter, TargetView, Verdict, Verifier
from specdec.engine import generate
from specdec.sampling import Sampling, warp
from specdec.testing.enumeration import enumerate_outcomes
from specdec.testing.table_lm import TableLM


class _FreezableCoins:
    """Delegates to ``inner`` until ``freeze()``; then takes the likeliest option (no branching).

    Forks wrap ``inner``'s forks and are frozen whenever their parent is (also when frozen later).
    """

    def __init__(self, inner: Coins, parent: _FreezableCoins | None = None) -> None:
        self.inner, self.parent, self._frozen = inner, parent, False

    @property
    def frozen(self) -> bool:
        return self._frozen or (self.parent is not None and self.parent.frozen)

    @frozen.setter
    def frozen(self, value: bool) -> None:
        self._frozen = value

    def bernoulli(self, prob: float) -> bool:
        return float(prob) >= 0.5 if self.frozen else self.inner.bernoulli(prob)

    def categorical(self, probs: torch.Tensor) -> int:
        return int(probs.argmax()) if self.frozen else self.inner.categorical(probs)

    def fork(self, key: Hashable) -> _FreezableCoins:
        return _FreezableCoins(self.inner.fork(key), self)


class _OneStep(Drafter):
    """Drafts with ``inner`` once, then freezes the coins and proposes empty drafts."""

    def __init__(self, inner: Drafter, coins: _FreezableCoins) -> None:
        self.inner, self.coins, self.done = inner, coins, False
        self.models = inner.models
        self.makes_trees = inner.makes_trees
        self.target_layers = inner.target_layers

    def reset(self) -> None:
        self.inner.reset()
        self.done = False

    def attach(self, target: TargetView) -> None:
        self.inner.attach(target)

    def prefill(self, prompt: torch.Tensor, features: torch.Tensor | None = None) -> None:
        self.inner.prefill(prompt, features)

    def counters(self) -> dict[str, int]:
        return self.inner.counters()

    def propose(self, ctx: Context) -> Draft:
        if self.done:
            self.coins.frozen = True
            return Draft.empty(ctx.root)
        self.done = True
        return self.inner.propose(ctx)

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        self.inner.observe(ctx, draft, verdict)


def one_step(
    target: TableLM,
    drafter: Drafter,
    verifier: Verifier,
    prompt: Sequence[int],
    sampling: Sampling,
    max_tokens: int,
) -> dict[tuple[int, ...], float]:
    """Exact distribution of the tokens emitted by the first step of ``generate``.

    Args:
        max_tokens: the generation budget (drafters cap their drafts at ``max_tokens − 1``).
    """

    def run(coins):
        frozen = _FreezableCoins(coins)
        out = generate(
            list(prompt),
            target,
            _OneStep(drafter, frozen),
            verifier,
            sampling=sampling,
            coins=frozen,
            max_new_tokens=max_tokens,
        )
        return tuple(out.tokens[: out.stats.accepted_per_step[0] + 1])

    return enumerate_outcomes(run)


def complete(
    step: dict[tuple[int, ...], float],
    target: TableLM,
    prompt: Sequence[int],
    sampling: Sampling,
    length: int,
) -> dict[tuple[int, ...], float]:
    """Law of the first ``length`` tokens: a step's output, then exact target sampling."""
    out: dict[tuple[int, ...], float] = {}
    for emitted, weight in step.items():
        head = emitted[:length]
        for tail in itertools.product(range(target.vocab_size), repeat=length - len(head)):
            prob, ctx = weight, [*prompt, *head]
            for tok in tail:
                prob *= float(warp(target.logits(tuple(ctx))[None], sampling)[0, tok])
                if prob == 0.0:
                    break
                ctx.append(tok)
            if prob > 0:
                key = (*head, *tail)
                out[key] = out.get(key, 0.0) + prob
    return out


def expected_emitted(step: dict[tuple[int, ...], float]) -> float:
    """Exact expected number of tokens one step emits (block efficiency of one target call)."""
    return sum(len(e) * w for e, w in step.items())
