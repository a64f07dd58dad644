"""SAGUARO sampling: the draft distribution reshaped so that the residual lands on cached tokens.

Kumar et al. 2025, "Speculative Speculative Decoding" (ICLR 2026; public code
github.com/tanishqkumar/ssd):
given the draft's (warped) distribution ``q``, a count ``F`` and a constant ``C ∈ (0, 1]``,

    σ_{F,C}(q)_t ∝ C · q_t   if t ∈ top_F(q),      σ_{F,C}(q)_t ∝ q_t   otherwise.

Drafting from ``q' = σ_{F,C}(q)`` lowers the draft's mass on its own top tokens, so after a
rejection the residual ``norm(max(p − q', 0))`` concentrates on them -- and they are exactly the
recovered tokens the speculation cache pre-drafts (``specdec.drafters.ssd_cache``): a higher
cache hit rate for some acceptance. ``q'`` is used for *both* sampling and verification (it is the
``Draft.q`` row the verifier sees), so tokenwise verification stays exact for any ``F, C``.
``C = 1`` is plain ``q`` (SAGUARO off). The paper's top-``F``; the public code rescales top-
``(F+1)`` with ``F`` its scalar fan-out -- here ``F`` is ``drafter.saguaro_top``. A one-hot
``q`` (greedy) is unchanged, whatever ``F`` and ``C``.
"""

from __future__ import annotations

import torch

from specdec.errors import BadInput


def check_saguaro(top: int, c: float) -> None:
    """Raise ``ValueError`` naming the bad setting."""
    if top < 1:
        raise BadInput(f"drafter.saguaro_top must be >= 1 (tokens downweighted), got {top}")
    if not 0.0 < c <= 1.0:
        raise BadInput(f"drafter.saguaro_c must be in (0, 1] (1: SAGUARO off), got {c}")


def reshape(q: torch.Tensor, top: int, c: float) -> torch.Tensor:
    """``σ_{top,c}(q)`` row by row.

    Args:
        q: ``[N, V]`` probability rows.
        top: ``F``, how many of each row's most likely tokens are multiplied by ``c``.
        c: ``C`` in (0, 1]; 1 returns ``q`` itself.

    Returns:
        ``[N, V]`` renormalised rows (same dtype).
    """
    if c == 1.0:
        return q
    idx = torch.topk(q, min(top, q.shape[-1]), dim=-1).indices  # [N, F]
    scale = torch.ones_like(q).scatter_(-1, idx, c)  # [N, V]
    out = q * scale
    return out / out.sum(-1, keepdim=True)
