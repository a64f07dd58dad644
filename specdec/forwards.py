"""The forward log: one ``ForwardRecord`` per model forward, with its lane and decoding step.

Every ``CachedLM`` forward appends a record. Modeled time
(``specdec.bench.pricing``) prices a run from these records alone, so they carry what the price
depends on:

* ``role`` (``target`` / ``draft``), ``new_tokens``, ``context``: the forward's size;
* ``seconds``, ``start``, ``end``: measured wall time (``time.perf_counter``);
* ``lane``: who ran it. ``"main"`` is the decoding loop's own thread; work a drafter runs in the
  background (a worker thread, another device or stream) runs inside ``with lane("<name>"):``, so
  its forwards are known to overlap the main lane's;
* ``step``: the decoding step the forward belongs to (``-1``: prefill or outside ``generate``).
  ``engine.generate`` stamps unstamped records after each step, once the drafter's background work
  for that step is joined (``Drafter.observe`` joins it); work prepared for a *later* step declares
  it with ``lane(name, step=k)``.

Pricing per step (§0.2): ``serial draft work + max(target lane, each background lane)``; a method
without background lanes is priced exactly as the sum of its forwards.

``check_finite`` guards every forward's logits (``CachedLM`` calls it, for target and draft alike,
so every drafter is covered by one check): a NaN row would otherwise decode silently, since argmax
over NaN picks token 0 at temperature 0. ``-inf`` is a legal logit (a reduced-vocabulary draft
gives it to tokens outside its map); NaN, ``+inf`` and a row with no finite logit are not. One
row-wise max finds all three (it propagates NaN). ``engine.generate`` adds the decoding step.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

import torch

MAIN = "main"
_local = threading.local()


@dataclass(frozen=True)
class ForwardRecord:
    """One model forward: model role, new tokens, cached context before it, time, lane, step."""

    role: str
    new_tokens: int
    context: int
    seconds: float
    start: float = 0.0
    end: float = 0.0
    lane: str = MAIN
    step: int = -1


@contextmanager
def lane(name: str, *, step: int = -1) -> Iterator[None]:
    """Forwards run by this thread inside the block are logged on lane ``name`` (and ``step``)."""
    saved = getattr(_local, "where", (MAIN, -1))
    _local.where = (name, step)
    try:
        yield
    finally:
        _local.where = saved


def current_lane() -> tuple[str, int]:
    """``(lane, step)`` that a forward run now by this thread is logged with."""
    return getattr(_local, "where", (MAIN, -1))


def stamp_step(log: list[ForwardRecord], start: int, step: int) -> None:
    """Give the records ``log[start:]`` that have no step yet the step ``step`` (in place)."""
    for i in range(start, len(log)):
        if log[i].step < 0:
            log[i] = replace(log[i], step=step)


class NonFiniteLogits(FloatingPointError):
    """A model forward produced NaN or infinite logits."""

    def at(self, where: str) -> NonFiniteLogits:
        """The same error, saying where in the generation it happened."""
        return NonFiniteLogits(f"{self}, at {where}")


def nonfinite_error(logits: torch.Tensor, *, role: str, context: int) -> NonFiniteLogits | None:
    """The ``NonFiniteLogits`` error naming the model if a row holds NaN or ``+inf``, or only
    ``-inf``; ``None`` when every row is fine. (Returned, not raised, so a timed forward can log
    itself before raising: ``lm.CachedLM``.)

    One ``amax`` pass (NaN propagates into a row's maximum): on CPU a plain max reduction is
    vectorised and ~10x cheaper than one that also returns the position (``max(dim)``,
    ``argmax``: ~3 vs ~30 us per 49k-token row on warm data).

    Args:
        logits: ``[N, V]`` raw logits of one forward's ``N`` new tokens.
        role: the model's role (``target`` / ``draft``).
        context: tokens cached before the forward (its first new token's position).
    """
    top = logits.amax(-1)  # [N] row maxima (NaN propagates)
    if bool(torch.isfinite(top).all()):
        return None
    n = int(logits.shape[0])
    return NonFiniteLogits(
        f"the {role} model produced NaN or +inf logits (or a row of -inf) for the tokens at "
        f"positions {context}..{context + n - 1}; check its weights (a broken or "
        "mis-converted checkpoint) or load it in a wider dtype (float32) if it overflows"
    )


def check_finite(logits: torch.Tensor, *, role: str, context: int) -> None:
    """Raise ``nonfinite_error``'s error, if any."""
    err = nonfinite_error(logits, role=role, context=context)
    if err is not None:
        raise err
