"""The forward log: one ``ForwardRecord`` per model forward, with its lane and decoding step.

Every ``CachedLM`` forward appends a record (ARCHITECTURE §0.2). Modeled time
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
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

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
