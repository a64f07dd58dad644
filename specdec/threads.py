"""Torch thread budgets: model forwards get the process's threads, the loop's own work gets one.

The decoding loop does small tensor work between forwards (warping ``[N, V]`` logits, argmax and
top-k over 49k-token rows, the verifier's draws, cache gathers). With several intra-op threads each
such op is an OpenMP parallel region, and when another process keeps a core busy every region waits
for a thread that is not scheduled: on the 2-core VM with one busy core an argmax over
``[5, 49152]``
took 8 ms with 2 threads and 0.17 ms with 1 (0.08 ms vs 0.13 ms on a quiet machine). The loop's
overhead then grows with the machine's load, and the modeled clock, which prices forwards only,
drifts from the wall clock (as it did in runs on a loaded machine).

So ``engine.generate`` runs inside ``loop_threads()``: the loop's work uses one thread, and every
model forward (``lm.CachedLM``, ``drafters.block_lm.BlockLM``) sets its budget with
``forward_threads`` around the model call: the model's own ``threads`` if it has one (a draft's
``model.placement.draft_threads``), else the budget the caller had when the loop started.
Budgets are per-thread (OpenMP's ``nthreads`` is a per-thread setting; ``drafters.ahead`` workers
set their own), so this state is thread-local.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_state = threading.local()


@contextmanager
def loop_threads(threads: int = 1) -> Iterator[None]:
    """Run the body's own tensor work on ``threads`` torch threads (at most the current budget);
    ``forward_threads`` hands forwards the budget in force on entry. Restored on exit."""
    saved, outer = torch.get_num_threads(), getattr(_state, "forward", None)
    _state.forward = saved if outer is None else outer
    torch.set_num_threads(max(1, min(int(threads), saved)))
    try:
        yield
    finally:
        torch.set_num_threads(saved)
        _state.forward = outer


def forward_threads(own: int | None) -> int:
    """The thread budget of a model forward: ``own`` (the model's), else the budget a surrounding
    ``loop_threads`` saved, else the current one."""
    if own is not None:
        return int(own)
    outer = getattr(_state, "forward", None)
    return torch.get_num_threads() if outer is None else outer


@contextmanager
def forward_budget(own: int | None) -> Iterator[None]:
    """Run a model call with ``forward_threads(own)`` threads; the caller's budget is restored."""
    saved, want = torch.get_num_threads(), forward_threads(own)
    if want != saved:
        torch.set_num_threads(want)
    try:
        yield
    finally:
        if torch.get_num_threads() != saved:
            torch.set_num_threads(saved)
