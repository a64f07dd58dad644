"""Recursive rejection sampling (RRS) over multi-draft chains and token trees.

SpecInfer (Miao et al. 2024, "SpecInfer: Accelerating LLM Serving with Tree-based Speculative
Inference", multi-step speculative sampling) and Yang et al. 2024 ("Multi-Candidate Speculative
Decoding"): at a node with target distribution ``p'`` (initially ``p[n]``) the children are tested
in order; child ``x`` drawn from ``q`` is accepted with ``min(1, p'(x) / q(x))``, and after a
rejection ``p' ← norm((p' − q)⁺)`` before the next child is tested.

* **With replacement** (``draft.q`` given): siblings are i.i.d. draws from ``q[n]`` (duplicates are
  separate nodes); the update above is exact.
* **Without replacement, point masses** (``draft.q = None``, deterministic top-k candidates, the
  EAGLE rule): child ``x`` is accepted with ``p'(x)``; after a rejection ``x`` is zeroed in ``p'``
  and ``p'`` renormalised.

On a chain this is tokenwise verification (``tokenwise.Tokenwise``). The per-chain rule below runs
under ``walk``, which supplies the sibling recursion. Lossless: exact enumeration,
tests/verifiers/test_verifiers_exact.py.
"""

from __future__ import annotations

import torch

from specdec.coins import Coins
from specdec.core import Draft, Verdict
from specdec.verifiers.tokenwise import accept_prob, residual
from specdec.verifiers.walk import walk


def tokenwise_rule(
    tokens: list[int], p_rows: torch.Tensor, q_rows: torch.Tensor | None, coins: Coins
) -> tuple[int, torch.Tensor]:
    """Chain rule: accept ``x_t`` with ``min(1, p/q)`` until the first rejection (see ``walk``)."""
    for t, x in enumerate(tokens):
        # 1. Accept x_{t+1} or 2. return the residual of its rejection.
        q_row = None if q_rows is None else q_rows[t]
        if not coins.bernoulli(accept_prob(p_rows[t], q_row, x)):
            return t, residual(p_rows[t], q_row, x)
    return len(tokens), p_rows[len(tokens)]


class RecursiveRejection:
    """RRS: tokenwise verification with recursion over siblings (multi-draft and trees)."""

    supports_trees = True
    lossless = True

    def verify(self, draft: Draft, p: torch.Tensor, coins: Coins) -> Verdict:
        """Accept a path of ``draft`` and emit a recovered or bonus token.

        Args:
            draft: chain or tree (``q [N, V]`` i.i.d. siblings, or ``None`` point masses).
            p: ``[N, V]`` warped target distributions per node.
            coins: randomness.
        """
        return walk(draft, p, coins, tokenwise_rule)
