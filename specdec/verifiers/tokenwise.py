"""Tokenwise verification: speculative sampling of Leviathan et al. 2023 / Chen et al. 2023.

Paper symbols (Leviathan et al., Algorithm 1): draft tokens ``x_1..x_γ`` with draft distributions
``q_{i-1} = q[i-1]`` and target distributions ``p_{i-1} = p[i-1]`` (node-indexed: row ``i`` is the
distribution over the children of node ``i``). Token ``x_i`` is accepted with probability
``min(1, p_{i-1}(x_i) / q_{i-1}(x_i))``; at the first rejection a *recovered* token is drawn from
the residual ``norm(max(p_{i-1} − q_{i-1}, 0))``; after full acceptance a *bonus* token is drawn
from ``p_γ``. With ``q = None`` (deterministic proposals) ``q_{i-1}`` is the point mass on ``x_i``:
accept with probability ``p_{i-1}(x_i)``, residual = ``p_{i-1}`` with ``x_i`` zeroed (the EAGLE
rule).

Lossless: proved for every draft length by the exact enumeration test
(tests/verifiers/test_exact_tokenwise.py).
"""

from __future__ import annotations

import torch

from specdec.coins import Coins
from specdec.core import Draft, Verdict


def residual(p_row: torch.Tensor, q_row: torch.Tensor | None, token: int) -> torch.Tensor:
    """The distribution of the recovered token after ``token`` was rejected.

    Args:
        p_row: ``[V]`` target distribution.
        q_row: ``[V]`` draft distribution ``token`` was drawn from, or ``None`` for a point mass.
        token: the rejected token.

    Returns:
        ``[V]`` ``norm(max(p − q, 0))``. When it is all zero (p == q, so the rejection had
        probability zero and only rounding reached it) the limit ``p_row`` is returned.
    """
    if q_row is None:
        if float(p_row[token]) == 0:  # nothing to remove (always so at T = 0): p itself
            return p_row
        res = p_row.clone()
        res[token] = 0
    else:
        res = (p_row - q_row).clamp_min(0)  # [V]
    total = res.sum()
    return res / total if total > 0 else p_row


def accept_prob(p_row: torch.Tensor, q_row: torch.Tensor | None, token: int) -> float:
    """``min(1, p(x) / q(x))`` (``p(x)`` for a point-mass ``q``)."""
    px = float(p_row[token])
    if q_row is None:
        return px
    qx = float(q_row[token])
    assert qx > 0, f"drafted token {token} has zero draft probability"
    return min(1.0, px / qx)


class Tokenwise:
    """Leviathan/Chen speculative sampling on a chain draft."""

    supports_trees = False
    lossless = True

    def verify(self, draft: Draft, p: torch.Tensor, coins: Coins) -> Verdict:
        """Accept a prefix of the chain, then emit a recovered or bonus token.

        Args:
            draft: a chain draft (``draft.q [N, V]`` or ``None``).
            p: ``[N, V]`` warped target distributions per node.
            coins: randomness.
        """
        assert draft.is_chain, "Tokenwise verifies chains"
        q = None if draft.q is None else draft.q.to(p)  # [N, V]
        path: list[int] = []
        for i in range(1, draft.size):
            # 1. Accept x_i with probability min(1, p/q); 2. else draw the recovered token.
            x = int(draft.tokens[i])
            q_row = None if q is None else q[i - 1]
            if coins.bernoulli(accept_prob(p[i - 1], q_row, x)):
                path.append(i)
                continue
            return Verdict(path, coins.categorical(residual(p[i - 1], q_row, x)))
        # 3. Every drafted token accepted: the bonus token comes from the last node's p.
        return Verdict(path, coins.categorical(p[draft.size - 1]))
