"""Block verification: Sun, Mendlovic, Leviathan, Aharoni, Beirami, Ro & Suresh 2024,
"Block Verification Accelerates Speculative Decoding" (arXiv:2403.10444), Algorithm 2.

Symbols (chain of L drafted tokens ``x_1..x_L``; row ``t`` of ``p_rows``/``q_rows`` is the target /
draft distribution of the token after ``x_{1:t}``, i.e. the paper's ``M_b(·|x_{≤t})`` and
``M_s(·|x_{≤t})``):

* running weight ``a_0 = 1``, ``a_t = min(1, a_{t-1} · p_{t-1}(x_t) / q_{t-1}(x_t))`` (the paper's
  ``p_t``; equal to HSD's capped prefix ratio ``R_t / max(1, R_1..R_t)``);
* residual weights ``w_t(v) = (a_t p_t(v) − q_t(v))⁺`` with total ``S_t``;
* ``h_t = S_t / (S_t + 1 − a_t)`` for ``t < L`` (``h_t = 1`` when ``a_t = 1``) and ``h_L = a_L``;
* ``τ = max{t : η_t ≤ h_t}`` over independent uniforms (``τ = 0`` if none; ``h_0 = 1``);
* output ``x_{1:τ}`` plus a token from ``norm(w_τ)``, or the bonus token from ``p_L`` if ``τ = L``.

This module scans *forward* (one Bernoulli per position, keeping the last success, the form of the
public HSD repository's blockwise baseline); ``hsd.py`` scans backward and stops at the
first success: the same law, found with fewer coins. With ``q = None`` the draft distributions are
point masses on the drafted tokens. On trees the chain rule runs under ``walk`` (sibling walk).

Lossless: exact enumeration, tests/verifiers/test_verifiers_exact.py. Expected accepted length ≥
tokenwise on every instance (Sun et al. Theorem 2): tests/verifiers/test_verifiers_theorem.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from specdec.coins import Coins
from specdec.core import Draft, Verdict
from specdec.verifiers.walk import walk


@dataclass(frozen=True)
class BlockTerms:
    """Per-position quantities of block verification for one chain of L tokens.

    Attributes:
        a: ``[L+1]`` capped running ratios ``a_t``.
        joint: ``[L+1]`` uncapped joint ratios ``R_t = P_t / Q_t``.
        h: ``[L+1]`` acceptance probabilities (``h[0] = 1``, ``h[L] = a_L``).
        weights: ``[L, V]`` residual weights ``(a_t p_t − q_t)⁺``.
    """

    a: list[float]
    joint: list[float]
    h: list[float]
    weights: torch.Tensor

    def next_dist(self, tau: int, p_rows: torch.Tensor) -> torch.Tensor:
        """``[V]`` distribution of the token after ``τ`` accepted tokens (residual or ``p_L``)."""
        if tau == len(self.weights):
            return p_rows[tau]
        total = self.weights[tau].sum()
        # S_τ = 0 only where h_τ = 1 forced τ past this position (probability zero): fall back to p
        return self.weights[tau] / total if total > 0 else p_rows[tau]


def point_masses(tokens: list[int], like: torch.Tensor) -> torch.Tensor:
    """``[L, V]`` one-hot rows on ``tokens`` (deterministic proposals)."""
    out = torch.zeros(len(tokens), like.shape[-1], dtype=like.dtype, device=like.device)
    return out.scatter_(1, torch.tensor(tokens, device=like.device)[:, None], 1.0)


def block_terms(tokens: list[int], p_rows: torch.Tensor, q_rows: torch.Tensor | None) -> BlockTerms:
    """Compute ``a_t``, ``R_t``, ``h_t`` and the residual weights (see the module docstring).

    Args:
        tokens: L drafted tokens.
        p_rows: ``[L+1, V]`` target rows.
        q_rows: ``[L, V]`` draft rows, or ``None`` for point masses.
    """
    n = len(tokens)
    q_full = point_masses(tokens, p_rows) if q_rows is None else q_rows  # [L, V]
    a, joint = [1.0], [1.0]
    for t in range(1, n + 1):
        # 1. The running ratio after x_t, capped (a) and uncapped (R).
        x = tokens[t - 1]
        qx = float(q_full[t - 1, x])
        assert qx > 0, f"drafted token {x} has zero draft probability"
        ratio = float(p_rows[t - 1, x]) / qx
        joint.append(joint[-1] * ratio)
        a.append(min(1.0, a[-1] * ratio))
    a_rows = torch.tensor(a[:n], dtype=p_rows.dtype, device=p_rows.device)[:, None]  # [L, 1]
    weights = (a_rows * p_rows[:n] - q_full).clamp_min(0)  # [L, V]
    h = [1.0]
    for t in range(1, n):
        # 2. h_t = S_t / (S_t + 1 − a_t); a_t = 1 means nothing is lost by stopping here.
        s = float(weights[t].sum())
        h.append(1.0 if a[t] >= 1.0 else s / (s + 1.0 - a[t]))
    if n:
        h.append(a[n])
    return BlockTerms(a, joint, h, weights)


def forward_block_rule(
    tokens: list[int], p_rows: torch.Tensor, q_rows: torch.Tensor | None, coins: Coins
) -> tuple[int, torch.Tensor]:
    """Chain rule: one Bernoulli(h_t) per position, ``τ`` = the last success (see ``walk``)."""
    terms = block_terms(tokens, p_rows, q_rows)
    tau = 0
    for t in range(1, len(tokens) + 1):
        if coins.bernoulli(terms.h[t]):
            tau = t
    return tau, terms.next_dist(tau, p_rows)


class Blockwise:
    """Sun et al. 2024 block verification; trees are verified chain by chain (``walk``)."""

    supports_trees = True
    lossless = True

    def verify(self, draft: Draft, p: torch.Tensor, coins: Coins) -> Verdict:
        """Accept a path of ``draft`` and emit a recovered or bonus token.

        Args:
            draft: chain or tree (``q [N, V]`` or ``None``).
            p: ``[N, V]`` warped target distributions per node.
            coins: randomness.
        """
        return walk(draft, p, coins, forward_block_rule)
