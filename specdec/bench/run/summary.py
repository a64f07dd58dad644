"""``summary.json`` and ``summary/<dataset>.json``: what an eval run's records add up to.

A dataset's metrics (``dataset_metrics``) are ``specdec.metrics.summarize`` over its records plus
end-to-end time (``specdec.bench.run.e2e``), the merged forward profile, quality means and what
the report compares runs on (prompt ids and file digest, generation length, formatting).
``price_run`` fits a cost table per dataset on its records' forward logs
(``specdec.bench.costfit``) and adds, per dataset, ``modeled_metrics``: ``modeled_s`` (the
records' forwards priced by that table), and with records that carry ``prompt_tokens`` and
``output_ids``, ``ar_modeled_s`` (AR's forwards for the same tokens,
``specdec.bench.pricing.ar_profile``, priced by the same table) and
``self_modeled_speedup = ar_modeled_s / modeled_s`` (overall: the datasets' sums): the run's own
speedup estimate, needing no ``ar`` run. It is not the leaderboard's ``modeled_speedup_vs_ar``
(the run paired with a real ``ar`` run, ``specdec.bench.report.rows``); ``overall`` also gets that
one and ``sweep_objective``, what ``python -m specdec.eval`` returns to a sweeper, once the run is
paired (``specdec.bench.run.paired``).

Completeness: ``summary.json`` is written when the run starts (before any generation, so a
previous run's summary never outlives a changed configuration) and again after each dataset, with

* ``complete``: true only once every dataset of the benchmark is summarised;
* ``datasets_done``: the datasets summarised so far (the only ones under ``datasets``);
* ``progress``: per dataset, the prompts ``recorded`` under this config hash and ``expected``.

A killed run therefore leaves ``complete: false``; the report marks such runs and ``--strict``
refuses them. A summary whose prompt counts disagree with the records (a dataset's ``prompts``
against its ``progress``, ``overall`` against the datasets) is a bug and is never written
(``check_counts``). Every file is strict JSON written atomically (``specdec.bench.rundir``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path

from specdec.bench.costfit import fit_cost_table, log_rows
from specdec.bench.pricing import CostTable, ar_profile, merge_profiles
from specdec.bench.run.e2e import end_to_end
from specdec.bench.run_summary import Progress, RunSummary
from specdec.bench.rundir import write_json
from specdec.bench.timing import calibration_reasons, table_reasons
from specdec.data.prompts import prompt_ids_hash
from specdec.errors import BadInput
from specdec.metrics import GenerationStats, summarize

log = logging.getLogger(__name__)

MODELED_KEYS = ("modeled_s", "ar_modeled_s", "self_modeled_speedup")
PAIRED_KEYS = ("modeled_speedup_vs_ar", "sweep_objective")  # specdec.bench.run.paired
RENAMED = {
    "modeled_speedup": "sweep_objective (what a sweep maximises), self_modeled_speedup "
    "(the run's own estimate) or modeled_speedup_vs_ar (paired with ar)"
}


def check_metric_name(name: str | None) -> None:
    """Fail before a run when ``optimized_metric`` names no metric a run can have.

    Raises:
        BadInput: naming the bad value and the valid names (a renamed metric: its new names).
    """
    valid = sorted({*summarize([]), *MODELED_KEYS, *PAIRED_KEYS})
    if name in RENAMED:
        raise BadInput(f"optimized_metric={name!r} was renamed: use {RENAMED[name]}")
    if name is not None and name not in valid and not name.startswith("quality_"):
        raise BadInput(
            f"optimized_metric={name!r} is not a run metric; use one of {valid}, "
            "a quality_<check> or null"
        )


def sweep_metric(summary: dict, name: str | None, *, sweeping: bool = True) -> float | None:
    """The ``overall`` metric ``name`` of a run, what ``python -m specdec.eval`` returns to a
    sweeper; None when ``name`` is None or the run has no such metric (then, in an optimising
    sweep, a warning says why; outside one nobody reads the value and nothing is said)."""
    if name is None:
        return None
    value = summary["overall"].get(name)
    say = log.warning if sweeping else log.debug
    if value is None:
        say(
            "optimized_metric=%s is undefined for this run (modeled_*, *_speedup* and "
            "sweep_objective need cost_model=true, quality_* need quality=true); the sweeper "
            "gets None",
            name,
        )
        return None
    if isinstance(value, float) and math.isnan(value):
        why = summary.get("sweep_objective_source") or ""
        say(
            "optimized_metric=%s is NaN for this run%s",
            name,
            f" ({why})" if why.startswith("not a number") else "",
        )
    return float(value)


def modeled_metrics(records: list[dict], cost: CostTable) -> dict[str, float]:
    """``modeled_s`` (when every record has its forward log), and ``ar_modeled_s`` and
    ``self_modeled_speedup`` (when, besides, every record has its per-turn token ids and prompt
    lengths), all priced by ``cost``."""
    if not records or not all("forward_log" in r for r in records):
        return {}
    out = {"modeled_s": sum(cost(log_rows(r["forward_log"])) for r in records)}
    if all("output_ids" in r and "prompt_tokens" in r for r in records):
        profile = merge_profiles(
            ar_profile(r["prompt_tokens"], [len(t) for t in r["output_ids"]]) for r in records
        )
        out["ar_modeled_s"] = cost.price(profile)
        out["self_modeled_speedup"] = (
            out["ar_modeled_s"] / out["modeled_s"] if out["modeled_s"] else float("nan")
        )
    return out


def dataset_metrics(
    records: list[dict],
    *,
    prompt_file_sha256: str,
    max_new_tokens: int,
    chat_template: bool,
    template: str,
) -> dict:
    """Metrics of one dataset's records (prompt order), with what makes runs comparable."""
    metrics = summarize([GenerationStats.from_record(r) for r in records])
    metrics.update(end_to_end(records))  # prefill split, total_s, e2e_tokens_per_s (run.e2e)
    if records and all("forward_profile" in r for r in records):
        metrics["forward_profile"] = merge_profiles(r["forward_profile"] for r in records)
    for key in sorted({k for r in records for k in r if k.startswith("quality_")}):
        values = [r[key] for r in records if key in r]
        # quality is hashed: every record of one config hash has its score, no subset mean
        assert len(values) == len(records), f"{key}: {len(values)} of {len(records)} scored"
        metrics[key] = sum(values) / len(values)
    metrics.update(
        prompt_ids_hash=prompt_ids_hash([r["prompt_id"] for r in records]),
        prompt_file_sha256=prompt_file_sha256,
        max_new_tokens=max_new_tokens,
        chat_template=chat_template,
        template=template,
    )
    return metrics


def price_run(
    summary: RunSummary, records: dict[str, list[dict]], calibration: CostTable | None
) -> None:
    """Price the run from its own forward logs (``specdec.bench.costfit``), in place.

    Each dataset gets a table fitted on its own records' forwards (``cost_tables[name]``, with
    ``cost_fits[name]`` saying what was fitted): the datasets of a run are decoded one after the
    other, so a machine whose load changes between them (a shared VM, a job starting alongside)
    prices each dataset at the speed it actually ran at. One run-wide table over every record would
    price a quiet dataset's forwards with a loaded one's times (an audit run under bursty load read
    modeled/wall 6.7 on one dataset and 0.44 on another). ``overall`` adds the datasets' modeled
    seconds. ``cost_table`` is the run-wide fit (what per-category and profile-only pricing use
    when a dataset has no table of its own), ``cost_table_monotone`` is false when any table has
    a monotonicity violation (each fit lists them raw, ``monotone_violations``, and those the
    calibration reproduces, ``kernel_shape``). ``timing.table`` (``specdec.bench.timing``) names
    what makes any of those tables unreliable: a drop with size beyond the noise that the
    calibration does not reproduce, a size priced at zero or less, a size the run made whose time
    is far from the calibration's. Without a calibration (``cost_model=false``) nothing is
    priced.
    """
    if calibration is None:
        return
    logs = {
        name: [log_rows(r["forward_log"]) for r in recs if "forward_log" in r]
        for name, recs in records.items()
    }
    table, fit = fit_cost_table([log for recs in logs.values() for log in recs], calibration)
    summary.cost_table, summary.calibration = table.to_dict(), calibration.to_dict()
    summary.cost_fit, summary.cost_tables, summary.cost_fits = fit, {}, {}
    fits, priced, reasons = [fit], [], []
    for name, recs in records.items():
        if name not in summary.datasets:
            continue
        own, own_fit = fit_cost_table(logs[name], calibration) if logs[name] else (table, fit)
        summary.cost_tables[name], summary.cost_fits[name] = own.to_dict(), own_fit
        fits.append(own_fit)
        reasons += _table_reasons(name, summary.cost_tables[name], own_fit, summary.calibration)
        summary.datasets[name].update(modeled_metrics(recs, own))
        priced.append(summary.datasets[name])
    summary.cost_table_monotone = not any(
        v for f in fits for v in f["monotone_violations"].values()
    )
    overall = {
        k: sum(m[k] for m in priced)
        for k in ("modeled_s", "ar_modeled_s")
        if priced and all(k in m for m in priced)
    }
    if len(overall) == 2:
        overall["self_modeled_speedup"] = (
            overall["ar_modeled_s"] / overall["modeled_s"] if overall["modeled_s"] else float("nan")
        )
    summary.overall.update(overall)
    if summary.timing is not None:  # each dataset's table (the run-wide one: none priced yet)
        summary.timing.table = (
            reasons
            if priced
            else _table_reasons("run", summary.cost_table, fit, summary.calibration)
        )


def _table_reasons(name: str, table: dict, fit: dict, calibration: dict) -> list[str]:
    """What makes one fitted table unreliable (``specdec.bench.timing`` checks 1-2)."""
    return [*table_reasons(name, table, fit), *calibration_reasons(name, table, fit, calibration)]


def check_counts(summary: RunSummary, progress: Progress) -> None:
    """Refuse a summary whose prompt counts disagree with the records: each summarised dataset
    counts every prompt it expects and has recorded, and ``overall`` counts their sum.

    Raises:
        RuntimeError: naming the dataset and both counts (a bug: the summary is not written).
    """
    for name, metrics in summary.datasets.items():
        seen, recorded = metrics.get("prompts"), progress[name]["recorded"]
        if not seen == recorded == progress[name]["expected"]:
            raise RuntimeError(
                f"{name}: the summary counts {seen} prompts, {recorded} are "
                f"recorded of {progress[name]['expected']} expected; not written"
            )
    if summary.datasets:
        seen = summary.overall.get("prompts")
        total = sum(m.get("prompts", 0) for m in summary.datasets.values())
        if seen != total:
            raise RuntimeError(
                f"overall: the summary counts {seen} prompts, {total} are in its "
                "datasets; not written"
            )


def write_summaries(
    out_dir: Path, summary: RunSummary, progress: Progress, dataset: str | None = None
) -> None:
    """Mark ``summary`` complete or not (in place) and write ``summary.json``; with ``dataset``,
    also ``summary/<dataset>.json`` (that dataset alone, complete). The counts are checked first
    (``check_counts``)."""
    done = list(summary.datasets)
    check_counts(summary, progress)
    summary.complete, summary.datasets_done = set(done) == set(progress), done
    summary.progress = progress
    if dataset is not None:
        write_json(
            out_dir / "summary" / f"{dataset}.json",
            replace(
                summary,
                datasets={dataset: summary.datasets[dataset]},
                complete=True,
                datasets_done=[dataset],
                progress={dataset: progress[dataset]},
            ).to_json(),
        )
    write_json(out_dir / "summary.json", summary.to_json())
