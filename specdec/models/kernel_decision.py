"""What the linear-kernel probe's timed passes decide (``models.kernel_probe``).

``best`` keeps each kernel's best pass per row count, ``spread`` says how far the passes disagree
(the probe goes on while they differ by more than ``MARGIN``), ``decide`` picks ``packed`` only
when it beats ``stock`` by ``MARGIN`` in total and loses by no more at any row count, and
``describe_timings`` writes the timings for the log and the pair's fingerprint.
"""

from __future__ import annotations

import math

MARGIN = 0.05  # packed must win by this fraction in total, and lose by no more at any row count
Timings = dict[str, dict[int, float]]  # kernel -> rows -> ms per pass
Passes = dict[str, dict[int, list[float]]]  # kernel -> rows -> ms of each timed pass


def best(passes: Passes) -> Timings:
    """The best pass per kernel and row count."""
    return {k: {m: min(ms) for m, ms in by_rows.items()} for k, by_rows in passes.items()}


def spread_at(passes: Passes, m: int) -> float:
    """``spread`` of the passes at ``m`` rows (inf with fewer than two passes)."""
    gaps = []
    for by_rows in passes.values():
        ms = sorted(by_rows[m])
        gaps.append((ms[1] - ms[0]) / ms[0] if len(ms) > 1 and ms[0] > 0 else math.inf)
    return max(gaps)


def spread(passes: Passes) -> float:
    """How far the passes disagree: the largest (second best - best) / best over every kernel
    and row count (inf where a kernel has fewer than two passes)."""
    return max(spread_at(passes, m) for m in next(iter(passes.values())))


def decide(timings: Timings) -> str:
    """``packed`` when it beats ``stock`` by ``MARGIN`` in total and at no row count loses by
    more than ``MARGIN``; otherwise ``stock``."""
    stock, packed = timings["stock"], timings["packed"]
    total_s, total_p = sum(stock.values()), sum(packed.values())
    never_worse = all(packed[m] <= stock[m] * (1 + MARGIN) for m in stock)
    return "packed" if never_worse and total_p < total_s * (1 - MARGIN) else "stock"


def describe_timings(timings: Timings) -> str:
    """``stock 1:41.20 4:55.00 | packed 1:30.10 4:40.20 ms`` (rows: ms per pass)."""
    parts = [
        f"{k} " + " ".join(f"{m}:{ms:.2f}" for m, ms in sorted(by_rows.items()))
        for k, by_rows in timings.items()
    ]
    return " | ".join(parts) + " ms"
