"""Leaderboard rows: one per (method run, dataset), with its speedups against a baseline run.

Speedup = seconds per generated token of the baseline run (``ar``) / that of the method run, on
one dataset (``wall_s / new_tokens``), computed only when the two runs compare
(``specdec.bench.report.runs.mismatches``); otherwise the row carries the reason it was refused. Per
token because at T > 0 the two runs' outputs (so their lengths) differ; greedy outputs are equal,
where this is ``wall_s`` over ``wall_s``. End-to-end speedup (``e2e_speedup``): the same with
``total_s`` (prefill + decode per turn, Spec-Bench's convention; ``specdec.bench.run.e2e``).

Modeled speedup vs ar (when the method run has a cost table): the baseline's forwards / the
method's forwards per generated token, both priced by one table fitted on both runs' forward logs
(``modeled_speedup_vs_ar``; older records without logs: both profiles priced by the method run's
table). It is not the summary's ``self_modeled_speedup`` (the run alone against AR-equivalent
forwards, ``specdec.bench.run.summary``). Wall-clock speedups on a shared machine move with its load
(±0.2 on the project's 2-core VM). A baseline run is paired with itself (speedup 1), never with
another baseline run.

Timing (``specdec.bench.timing``): a row of a run whose timing was checked carries the reasons
its timing is unreliable (``Row.timing``): the run's own verdict, its baseline's, and, against a
baseline, two runs' calibrations that disagree or a table fitted on both logs that drops with
size beyond its noise. Such a row claims no speedup (``speedup`` and ``modeled_speedup_vs_ar``
None) unless ``SPECDEC_TIMING=lenient``.

Each row also carries its greedy equality against the baseline at temperature 0
(``specdec.bench.report.greedy``). Runs that differ only in their seed are merged into one row of
means with standard deviations (``specdec.bench.report.repeats``); a method with several distinct
configurations gets one label per configuration: ``method (<folder>)``, the run folder's name, or
its path below the runs' common folder where names repeat; the folder named after the method (the
default command's) keeps the plain ``method``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from specdec.bench.costfit import fit_cost_table, log_rows, record_modeled_s
from specdec.bench.pricing import CostTable
from specdec.bench.report.greedy import find_greedy
from specdec.bench.report.repeats import aggregate
from specdec.bench.report.row import Row
from specdec.bench.report.runs import Run, mismatches
from specdec.bench.timing import paired_reasons, strict, table_reasons


def paired_modeled_speedup(
    run: Run, base: Run, dataset: str, reasons: list[str] | None = None
) -> float | None:
    """Baseline forwards / method forwards per generated token, both priced by one cost table.

    The table is fitted on both runs' forward logs of the dataset (``specdec.bench.costfit``,
    with ``run``'s calibration for sizes neither made), so each size is priced by what it took
    in the runs and both sides share one price list. Records without forward logs (older runs):
    both forward profiles priced by ``run``'s own table. None when ``run`` has no cost table or
    either side lacks forwards. ``reasons`` (when given) gets what makes the joint table
    unreliable (``specdec.bench.timing.table_reasons``).
    """
    table = run.summary.cost_table
    mine_recs, theirs_recs = run.records(dataset), base.records(dataset)
    if (
        table
        and mine_recs
        and theirs_recs
        and all("forward_log" in r for r in [*mine_recs, *theirs_recs])
    ):
        calibration = run.summary.calibration
        joint, fit = fit_cost_table(
            [log_rows(r["forward_log"]) for r in [*mine_recs, *theirs_recs]],
            CostTable.from_dict(calibration) if calibration else None,
        )
        if reasons is not None and run is not base:
            reasons += table_reasons(f"{dataset} table of both runs", joint.to_dict(), fit)
        own = sum(record_modeled_s(r, joint) for r in mine_recs) / _tokens(mine_recs)
        theirs_s = sum(record_modeled_s(r, joint) for r in theirs_recs) / _tokens(theirs_recs)
        return theirs_s / own if own else math.nan
    mine = run.summary.datasets[dataset].get("forward_profile")
    theirs = base.summary.datasets[dataset].get("forward_profile")
    if not table or mine is None or theirs is None:
        return None
    cost = CostTable.from_dict(table)
    # the method's own modeled_s prices its overlap per step (a profile would price it serially)
    own = run.summary.datasets[dataset].get("modeled_s", cost.price(mine))
    own /= max(run.summary.datasets[dataset].get("new_tokens", 1), 1)
    theirs_s = cost.price(theirs) / max(base.summary.datasets[dataset].get("new_tokens", 1), 1)
    return theirs_s / own if own else math.nan


def _tokens(records: list[dict]) -> int:
    """New tokens over a run's records of one dataset (at least 1)."""
    return max(sum(int(r.get("new_tokens", 0)) for r in records), 1)


def _row(run: Run, dataset: str, runs: list[Run], baseline: str) -> Row:
    """The row of one run on one dataset, against the first comparable baseline run."""
    metrics = run.summary.datasets[dataset]
    row = Row(run, dataset, metrics, run.method)
    candidates = [b for b in runs if b.method == baseline and dataset in b.summary.datasets]
    if run.method == baseline:  # a baseline run is its own baseline
        candidates = [run]
    reasons = {b.path: mismatches(run, b, dataset, target_only=True) for b in candidates}
    match = next((b for b in candidates if not reasons[b.path]), None)
    if match is not None:
        row.baseline = match
        base_m = match.summary.datasets[dataset]
        base_s = base_m["wall_s"] / max(base_m.get("new_tokens", 1), 1)  # seconds per token
        s = metrics["wall_s"] / max(metrics.get("new_tokens", 1), 1)
        row.speedup = base_s / s if s else math.nan
        if "total_s" in metrics and "total_s" in base_m:  # end to end, prefill included
            own_e2e = metrics["total_s"] / max(metrics.get("new_tokens", 1), 1)
            row.e2e_speedup = (
                base_m["total_s"] / max(base_m.get("new_tokens", 1), 1) / own_e2e
                if own_e2e
                else math.nan
            )
        pairing: list[str] = []
        row.modeled_speedup_vs_ar = paired_modeled_speedup(run, match, dataset, pairing)
        _judge(row, match, pairing)
    elif not candidates:
        row.refused = f"no `{baseline}` run of dataset {dataset} among the inputs"
    else:
        b = candidates[0]
        row.refused = f"speedup vs `{baseline}` run {b.path} refused: " + "; ".join(reasons[b.path])
    row.greedy = find_greedy(run, candidates, dataset, preferred=match)
    if match is None and run.summary.timing is not None:  # no baseline: its own verdict
        row.timing = run.summary.timing.reasons
        row.withheld = bool(row.timing) and strict()
    return row


def _judge(row: Row, base: Run, pairing: list[str]) -> None:
    """Set the row's timing reasons (its run's, its baseline's, ``pairing`` and the two runs'
    calibrations) when its run was checked; withhold its speedups when there are any (strict)."""
    own = row.run.summary.timing
    if own is None:
        return
    reasons = list(own.reasons)
    if base is not row.run:
        theirs = base.summary.timing
        reasons += [f"the `{base.method}` run's {r}" for r in (theirs.reasons if theirs else [])]
        reasons += pairing + paired_reasons(
            row.run.summary.calibration, base.summary.calibration, base.method
        )
    row.timing = list(dict.fromkeys(reasons))
    if row.timing and strict():
        row.speedup = row.modeled_speedup_vs_ar = row.e2e_speedup = None
        row.withheld = True


def build_rows(runs: list[Run], *, baseline: str = "ar") -> list[Row]:
    """Leaderboard rows with speedups against a comparable baseline run, or a refusal reason;
    repeats merged."""
    rows = aggregate(
        [_row(run, dataset, runs, baseline) for run in runs for dataset in run.summary.datasets]
    )
    seen: set[tuple[str, str]] = set()
    shared: set[str] = set()  # methods with two rows on one dataset: label them by folder
    for row in rows:
        key = (row.run.method, row.dataset)
        if key in seen:
            shared.add(row.run.method)
        seen.add(key)
    for method in shared:
        own = [r for r in rows if r.run.method == method]
        for row, label in zip(own, folder_labels(method, [r.run.path for r in own])):
            row.label = label
    rows.sort(key=lambda r: (r.dataset, -_num(r.speedup), r.label))
    return rows


def folder_labels(method: str, paths: list[Path]) -> list[str]:
    """Labels of one method's rows from their folders: the folder's name, or (where names
    repeat) its path below the folders' common parent; the folder named after the method (the
    default command's run) keeps the plain method name."""
    names = [p.name for p in paths]
    if len(set(names)) < len(set(paths)):
        root = Path(os.path.commonpath([str(p) for p in paths]))
        names = [str(p.relative_to(root)) if p != root else p.name for p in paths]
    return [method if name == method else f"{method} ({name})" for name in names]


def _num(x: float | None) -> float:
    return -1.0 if x is None or math.isnan(x) else x
