"""Repeats: runs that differ only in their seed become one leaderboard row of mean ± std.

How to repeat a measurement: sweep the seed, e.g. ``python -m specdec.eval -m method=ar,sps
seed=0,1,2``. Each seed is an ordinary run: its own folder (``seed=<s>`` is in the folder name),
its own config hash (the seed is hashed, so records of different seeds never mix), resumable and
complete-or-not like any run. The report first pairs every method run with the ``ar`` run of the
*same* seed (``specdec.bench.report.runs.mismatches`` compares the seed), so each speedup is paired;
then it merges the rows of runs that agree on everything but the seed (``repeat_key``: method, the
record-relevant config, learned weights, prompt files, pair, machine, software and the dataset's
prompts). Each number of a merged row is the mean over its runs, with the sample standard
deviation (n - 1 in the denominator) beside it; greedy equality adds up prompts over the runs.

Why seeds across run folders rather than a ``repeats`` key inside one run: records stay one per
prompt per config hash, so resume, completeness and the hash need no change, and a repeat is a
plain Hydra multirun. At temperature 0 the seed changes no token, so repeats measure the timing
noise of the machine; above 0 they also sample other outputs.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from dataclasses import replace
from typing import TYPE_CHECKING

from specdec.bench.records import config_hash
from specdec.bench.report.greedy import Greedy
from specdec.bench.report.row import Row
from specdec.bench.report.runs import PROMPT_KEYS, Run, read_runs
from specdec.errors import InputError

if TYPE_CHECKING:
    from pathlib import Path

log = logging.getLogger(__name__)


def run_key(run: Run) -> str:
    """What a run's repeats share: everything that changes a record, but the seed (a summary
    without its config is a row of its own)."""
    summary = run.summary
    if summary.config is None:
        return str(run.path)
    config = {k: v for k, v in summary.config.items() if k != "seed"}
    chash = config_hash(
        {**config, "learned_weights": summary.learned_weights, "prompt_files": summary.prompt_files}
    )
    return json.dumps(
        [run.method, chash, summary.model, summary.machine, summary.software, summary.lossless],
        sort_keys=True,
        default=str,
    )


def _prompts(run: Run) -> int:
    """The run's recorded prompts over its datasets (the records' count, ``Run.audit``)."""
    if run.audit is not None:
        return sum(run.audit.counts.values())
    return sum(int(m.get("prompts") or 0) for m in run.summary.datasets.values())


def _describe(run: Run) -> str:
    return f"{'complete' if run.incomplete is None else 'incomplete'}, {_prompts(run)} prompts"


def drop_copies(runs: list[Run]) -> tuple[list[Run], list[str]]:
    """The runs without copies: a folder given twice, or runs whose configuration and seed
    (``run_key``, ``seed``) are equal (a copied folder is the same measurement, not a repeat);
    and, per dropped run, ``"<path>: <why>"``. Of the copies the one kept is the complete one
    with the most recorded prompts (the first given, among equals), in the place of the first."""
    groups: dict[str, list[Run]] = {}
    for run in runs:
        groups.setdefault(json.dumps([run_key(run), run.summary.seed], default=str), []).append(run)
    kept: list[Run] = []
    dropped: list[str] = []
    for group in groups.values():
        # 1. The best copy: complete first, then the most prompts, then the first given.
        best = max(
            enumerate(group), key=lambda ir: (ir[1].incomplete is None, _prompts(ir[1]), -ir[0])
        )[1]
        kept.append(best)
        # 2. Every other copy, named with the choice.
        for run in group:
            if run is best:
                continue
            same = best.path.resolve() == run.path.resolve()
            dropped.append(
                f"{run.path}: "
                + (
                    "given twice"
                    if same
                    else f"same configuration and seed as {best.path} (a copy of one "
                    "measurement, not a repeat: repeats differ in their seed); counted "
                    f"once: kept {best.path} ({_describe(best)}) over this copy "
                    f"({_describe(run)})"
                )
            )
    return kept, dropped


def repeat_key(row: Row) -> str:
    """``run_key`` plus the dataset and its prompts: rows with one key are repeats."""
    metrics = row.metrics
    return json.dumps(
        [run_key(row.run), row.dataset, {k: metrics.get(k) for k in PROMPT_KEYS}],
        sort_keys=True,
        default=str,
    )


def mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation; None when any value is missing (std also when n < 2)."""
    if not values or any(v is None for v in values):
        return None, None
    floats = [float(v) for v in values if v is not None]
    if any(math.isnan(v) for v in floats):
        return math.nan, None
    return statistics.fmean(floats), statistics.stdev(floats) if len(floats) > 1 else None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _merge_metrics(rows: list[Row]) -> tuple[dict, dict[str, float]]:
    """Mean of every numeric metric (per-position lists element-wise) and the numbers' stds."""
    merged, std = dict(rows[0].metrics), {}
    for key, first in rows[0].metrics.items():
        values = [r.metrics.get(key) for r in rows]
        if first is None or _is_number(first):
            if all(v is None or _is_number(v) for v in values):
                merged[key], s = mean_std(values)
                if s is not None:
                    std[key] = s
        elif isinstance(first, list) and all(
            isinstance(v, list) and len(v) == len(first) for v in values
        ):
            merged[key] = [mean_std(list(col))[0] for col in zip(*values)]
    return merged, std


def _merge_greedy(rows: list[Row]) -> Greedy | None:
    found = [r.greedy for r in rows]
    if any(g is None for g in found):
        return None
    return Greedy(
        sum(g.equal for g in found),
        sum(g.prompts for g in found),
        tuple(i for g in found for i in g.mismatched),
        found[0].baseline,
    )


def merge(rows: list[Row]) -> Row:
    """One row for the repeats ``rows`` (a single row is returned as it is)."""
    if len(rows) == 1:
        return rows[0]
    metrics, std = _merge_metrics(rows)
    out = replace(rows[0], metrics=metrics, std=std, members=list(rows), greedy=_merge_greedy(rows))
    refused = next((r.refused for r in rows if r.refused), None)
    for key in ("speedup", "modeled_speedup_vs_ar", "e2e_speedup"):
        mean, s = mean_std([getattr(r, key) for r in rows]) if refused is None else (None, None)
        setattr(out, key, mean)
        if s is not None:
            out.std[key] = s
    out.refused = refused
    return out


def aggregate(rows: list[Row]) -> list[Row]:
    """Merge repeats (rows with one ``repeat_key``), keeping the first row's place."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(repeat_key(row), []).append(row)
    return [merge(group) for group in groups.values()]


def usable_runs(
    paths: list[str | Path], *, warn: bool = True
) -> tuple[list[Run], list[str], list[str]]:
    """The runs below ``paths`` a report can use, the unreadable summaries and the copies left
    out (each logged as a warning with ``warn``).

    Raises:
        InputError: no readable summary among the inputs.
    """
    runs, unreadable = read_runs(paths)
    runs, copies = drop_copies(runs)
    for line in unreadable if warn else []:
        log.warning("skipped (unreadable): %s", line)
    for line in copies if warn else []:
        log.warning("counted once: %s", line)
    if not runs:
        raise InputError("no readable summary.json among the inputs: " + "; ".join(unreadable))
    return runs, unreadable, copies
