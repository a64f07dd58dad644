"""Leaderboard rows without eval runs, for the tests of what the report draws and typesets.

``row`` builds a ``specdec.bench.report.row.Row`` whose run is a stand-in holding only what the
plots and the LaTeX table read (the method preset and a folder); ``repeats`` merges rows of one
method and dataset as the report merges repeats over seeds (``specdec.bench.report.repeats``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from specdec.bench.report.repeats import merge
from specdec.bench.report.row import Row


def row(
    method: str,
    dataset: str,
    speedup: float | None,
    *,
    label: str | None = None,
    tau: float = 2.0,
    acceptance: list[float] | None = None,
    **metrics: object,
) -> Row:
    """One single-run row: ``speedup`` vs ar, τ = ``tau``, per-position ``acceptance``."""
    run = SimpleNamespace(method=method, path=Path("runs") / method, incomplete=None)
    values = {
        "block_efficiency": tau,
        "tokens_per_s": 100.0 * (speedup or 1.0),
        "acceptance_rate": 0.5,
        "per_position_acceptance": acceptance or [0.8, 0.6],
        **metrics,
    }
    return Row(run=run, dataset=dataset, metrics=values, label=label or method, speedup=speedup)


def repeats(method: str, dataset: str, speedups: list[float], taus: list[float]) -> Row:
    """The merged row of one run per (speedup, τ) pair: means and sample standard deviations."""
    return merge([row(method, dataset, s, tau=t) for s, t in zip(speedups, taus)])
