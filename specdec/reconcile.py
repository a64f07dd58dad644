"""Bring an LM's cache to the committed tokens: keep the longest common prefix, forward the rest.

Written once for every ``core.LM`` (``lm.CachedLM``, ``testing.table_lm.TableLM``): their
``reconcile`` methods call ``reconcile_cache``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specdec.core import LM, LMOut


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists.

    Slice comparisons run in C: the whole prefix first (the usual case: the cache is the
    committed tokens plus a few drafted ones), else a bisection down to a short span.
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo]; the first mismatch is in [lo, hi)
    while hi - lo > 16:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return next(i for i in range(lo, hi) if a[i] != b[i])


def reconcile_cache(lm: LM, ids: list[int], *, hidden_layers: Sequence[int] = ()) -> LMOut:
    """``lm.reconcile`` written once for every ``core.LM`` (``CachedLM``, ``TableLM``).

    Args:
        lm: the model whose cache is brought to ``ids``.
        ids: committed token ids (prompt + generated), at least one; the last one is the root.
        hidden_layers: also return these layers' hidden states (``hidden [K, k, H]``).

    Returns:
        ``LMOut(logits [K, V], hidden)`` of the ``K >= 1`` forwarded tokens ``ids[-K:]``.
    """
    assert ids, "reconcile needs at least the root"
    keep = common_prefix(lm.ids, ids[:-1])
    lm.crop(keep)
    return lm.forward(torch.tensor(ids[keep:], dtype=torch.long), hidden_layers=hidden_layers)
