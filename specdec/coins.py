"""Coins: the only source of randomness for drafters and verifiers (a protocol).

Production code draws from ``sampling.TorchCoins`` (one generator per prompt, seeded from the seed
and the prompt id); the exact harness (``testing.enumeration.EnumerationCoins``) enumerates every
branch with its probability. ``fork(key)`` gives background work a stream of its own.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class Coins(Protocol):
    """The only source of randomness for drafters and verifiers.

    Production code uses ``sampling.TorchCoins``; the exact harness (``testing.enumeration``)
    enumerates every branch with its probability.
    """

    def bernoulli(self, prob: float) -> bool:
        """True with probability ``prob`` (clamped to [0, 1])."""
        ...

    def categorical(self, probs: torch.Tensor) -> int:
        """An index drawn from the 1-D distribution ``probs [V]`` (non-negative, sums to 1)."""
        ...

    def fork(self, key: Hashable) -> Coins:
        """A child stream determined only by this stream's seed and ``key``.

        For work whose draws must not depend on thread timing or on how many numbers this stream
        has consumed: background drafting, drafts prepared for guessed verification outcomes
        (key them e.g. ``(step, guessed_outcome)``). Forking the same key twice would give the
        same stream, so a key must be unique per use: production coins (``TorchCoins``) and the
        exact harness both raise ``ValueError`` on a repeat. Drawing from a child never moves the
        parent, and a child can fork again. Keys are built from ``int``, ``str``, ``bool``,
        ``None`` and tuples of those (see ``sampling.fork_seed``); anything else raises
        ``TypeError``.
        """
        ...
