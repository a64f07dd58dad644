"""Hierarchical Speculative Decoding (HSD): Zhou et al., "Overcoming Joint Intractability with
Lossless Hierarchical Speculative Decoding", ICLR 2026 (code: github.com/ZhouYuxuanYX/
Hierarchical-Speculative-Decoding).

Paper symbols → ours (chain ``X_{1:γ}`` = ``tokens``, row ``t`` = distributions after ``X_{1:t}``):

* joint prefix ratio ``r(X_{1:t}) = P_t / Q_t`` → ``BlockTerms.joint[t]``;
* capped prefix ratio ``r*`` (clamp the largest earlier prefix ratio above 1 to 1), clipped at 1 →
  ``BlockTerms.a[t]`` (the code's running-max cap ``R_t / max(1, R_1..R_t)``);
* branch divergences of ``Branch(X_{1:t})``: ``D(p,q) = Σ_v (r* p_t(v) − q_t(v))⁺``,
  ``D(q,p) = Σ_v (q_t(v) − r* p_t(v))⁺``; acceptance ``h_t = D(p,q) / max(D(p,q), D(q,p))``
  (= ``S_t / (S_t + 1 − a_t)``, ``blockwise.block_terms``);
* backward scan: for ``t = γ, …, 1`` draw ``η_t``; the first ``t`` with ``η_t ≤ h_t`` is ``τ``;
* capped branch resampling at ``τ+1``: ``P*_res ∝ (r* p_τ − q_τ)⁺``; bonus ``~ p_γ`` at ``τ = γ``.

``final_accept`` chooses ``h_γ`` (the only point where paper and public code differ):

* ``"capped"``: ``h_γ = min(1, r*(X_{1:γ}))`` (Algorithm 2 with the capped ratio). This is exactly
  Sun et al.'s block verification, scanned backward. **Lossless** (exact enumeration).
* ``"joint"``: ``h_γ = min(1, r(X_{1:γ}))``, the uncapped joint ratio of the public code.
  **Not lossless**: tests/verifiers/test_verifiers_hsd.py pins its measured deviation.

Trees and multi-draft (the public code's EAGLE-3H): the chain rule runs under ``walk``; after a
rejection at depth
``τ`` the next sibling is verified against the residual with the running ratio restarted at 1 (the
public code carries ``P_τ, Q_τ`` over instead; that variant is not implemented).
"""

from __future__ import annotations

from functools import partial

import torch

from specdec.coins import Coins
from specdec.core import Draft, Verdict
from specdec.errors import BadInput
from specdec.verifiers.blockwise import block_terms
from specdec.verifiers.walk import walk

#: measured by tests/verifiers/test_verifiers_hsd.py (exact enumeration), never from the paper.
LOSSLESS = {"capped": True, "joint": False}


def backward_hsd_rule(
    tokens: list[int],
    p_rows: torch.Tensor,
    q_rows: torch.Tensor | None,
    coins: Coins,
    *,
    final_accept: str = "capped",
) -> tuple[int, torch.Tensor]:
    """Chain rule: HSD backward scan for the longest accepted prefix (see ``walk``)."""
    terms = block_terms(tokens, p_rows, q_rows)
    n = len(tokens)
    h = list(terms.h)
    if n and final_accept == "joint":
        h[n] = min(1.0, terms.joint[n])
    tau = 0
    for t in range(n, 0, -1):
        # 1. Scan back from the end: the first position whose branch test passes is τ.
        if coins.bernoulli(h[t]):
            tau = t
            break
    # 2. Capped branch resampling at τ+1 (or the bonus distribution when τ = γ).
    return tau, terms.next_dist(tau, p_rows)


class Hierarchical:
    """HSD verification (backward scan, capped branch resampling).

    Args:
        final_accept: ``"capped"`` (lossless) or ``"joint"`` (public code; not lossless).
    """

    supports_trees = True
    lossless = True

    def __init__(self, final_accept: str = "capped") -> None:
        if final_accept not in LOSSLESS:
            raise BadInput(
                f"verifier.final_accept must be one of {sorted(LOSSLESS)}, got {final_accept!r}"
            )
        self.final_accept = final_accept
        self.lossless = LOSSLESS[final_accept]
        self._rule = partial(backward_hsd_rule, final_accept=final_accept)

    def verify(self, draft: Draft, p: torch.Tensor, coins: Coins) -> Verdict:
        """Accept a path of ``draft`` and emit a recovered or bonus token.

        Args:
            draft: chain or tree (``q [N, V]`` or ``None``).
            p: ``[N, V]`` warped target distributions per node.
            coins: randomness.
        """
        return walk(draft, p, coins, self._rule)
