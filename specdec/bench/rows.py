"""Leaderboard rows: one per (method run, dataset), with its speedups against a baseline run.

Speedup = ``wall_s`` of the baseline run (``ar``) / ``wall_s`` of the method run, on one dataset
(ARCHITECTURE §0.3), computed only when the two runs compare (``specdec.bench.runs.mismatches``);
otherwise the row carries the reason it was refused.

Modeled speedup (when the method run calibrated a cost table and both runs' records carry forward
profiles, ``specdec.bench.pricing``): the baseline's forwards / the method's forwards, both priced
by the method run's table. Wall-clock speedups on a shared machine move with its load (±0.2 on the
project's 2-core VM); the modeled one depends only on token counts and one calibration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specdec.bench.pricing import CostTable
from specdec.bench.runs import Run, mismatches


@dataclass
class Row:
    """One leaderboard row (a method run on one dataset)."""

    run: Run
    dataset: str
    metrics: dict
    label: str = ""
    speedup: float | None = None
    baseline: Run | None = None
    refused: str | None = None
    modeled_speedup: float | None = None



def modeled_speedup(run: Run, base: Run, dataset: str) -> float | None:
    """Baseline forwards / method forwards, both priced by ``run``'s own calibrated cost table.

    One calibration prices both sides, so machine-speed drift between the two runs cancels; None
    when ``run`` has no cost table or either side's records lack forward profiles.
    """
    table = run.summary.get("cost_table")
    mine = run.summary["datasets"][dataset].get("forward_profile")
    theirs = base.summary["datasets"][dataset].get("forward_profile")
    if not table or mine is None or theirs is None:
        return None
    cost = CostTable.from_dict(table)
    # the method's own modeled_s prices its overlap per step (a profile would price it serially)
    own = run.summary["datasets"][dataset].get("modeled_s", cost.price(mine))
    return cost.price(theirs) / own if own else math.nan


def build_rows(runs: list[Run], *, baseline: str = "ar") -> list[Row]:
    """Leaderboard rows with speedups against a comparable baseline run, or a refusal reason."""
    rows = []
    folders: dict[str, set[Path]] = {}
    for run in runs:
        folders.setdefault(run.method, set()).add(run.path)
    for run in runs:
        label = run.method if len(folders[run.method]) == 1 else f"{run.method} ({run.path.name})"
        for dataset, metrics in run.summary["datasets"].items():
            row = Row(run, dataset, metrics, label)
            candidates = [b for b in runs if b.method == baseline and dataset in
                          b.summary["datasets"]]
            reasons = {b.path: mismatches(run, b, dataset, target_only=True) for b in candidates}
            match = next((b for b in candidates if not reasons[b.path]), None)
            if match is not None:
                row.baseline = match
                base_s, s = match.summary["datasets"][dataset]["wall_s"], metrics["wall_s"]
                row.speedup = base_s / s if s else math.nan
                row.modeled_speedup = modeled_speedup(run, match, dataset)
            elif not candidates:
                row.refused = f"no `{baseline}` run of dataset {dataset} among the inputs"
            else:
                b = candidates[0]
                row.refused = (f"speedup vs `{baseline}` run {b.path} refused: "
                               + "; ".join(reasons[b.path]))
            rows.append(row)
    rows.sort(key=lambda r: (r.dataset, -_num(r.speedup), r.label))
    return rows


def _num(x: float | None) -> float:
    return -1.0 if x is None or math.isnan(x) else x

