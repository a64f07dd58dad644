"""``summary.json`` and ``summary/<dataset>.json``: what an eval run's records add up to.

A dataset's metrics (``dataset_metrics``) are ``specdec.metrics.summarize`` over its records plus
the merged forward profile, quality means and what the report compares runs on
(prompt ids and file digest, generation length, formatting).

Completeness: ``summary.json`` is written when the run starts (before any generation, so a
previous run's summary never outlives a changed configuration) and again after each dataset, with

* ``complete``: true only once every dataset of the benchmark is summarised;
* ``datasets_done``: the datasets summarised so far (the only ones under ``datasets``);
* ``progress``: per dataset, the prompts ``recorded`` under this config hash and ``expected``.

A killed run therefore leaves ``complete: false``; the report marks such runs and ``--strict``
refuses them. Every file is strict JSON written atomically (``specdec.bench.rundir``).
"""

from __future__ import annotations

from pathlib import Path

from specdec.bench.costfit import fit_cost_table, log_rows
from specdec.bench.pricing import CostTable, merge_profiles
from specdec.bench.rundir import write_json
from specdec.data.prompts import prompt_ids_hash
from specdec.metrics import GenerationStats, summarize

Progress = dict[str, dict[str, int]]  # dataset -> {"recorded": n, "expected": m}


def dataset_metrics(records: list[dict], *, prompt_file_sha256: str, max_new_tokens: int,
                    chat_template: bool, template: str) -> dict:
    """Metrics of one dataset's records (prompt order), with what makes runs comparable."""
    metrics = summarize([GenerationStats.from_record(r) for r in records])
    if records and all("forward_profile" in r for r in records):
        metrics["forward_profile"] = merge_profiles(r["forward_profile"] for r in records)
    for key in sorted({k for r in records for k in r if k.startswith("quality_")}):
        values = [r[key] for r in records if key in r]
        # quality is hashed: every record of one config hash has its score, no subset mean
        assert len(values) == len(records), f"{key}: {len(values)} of {len(records)} scored"
        metrics[key] = sum(values) / len(values)
    metrics.update(prompt_ids_hash=prompt_ids_hash([r["prompt_id"] for r in records]),
                   prompt_file_sha256=prompt_file_sha256, max_new_tokens=max_new_tokens,
                   chat_template=chat_template, template=template)
    return metrics


def price_run(summary: dict, records: dict[str, list[dict]], calibration: CostTable | None) -> None:
    """Fit the run's cost table on the forward logs of all its records so far
    (``specdec.bench.costfit``) and price every dataset with it (``modeled_s``), in place.

    The summary keeps the fitted table (``cost_table``), what was fitted and what came from the
    short ``calibration`` (``cost_fit``), and ``cost_table_monotone``. Without a calibration
    (``cost_model=false``) nothing is priced.
    """
    if calibration is None:
        return
    logs = {name: [log_rows(r["forward_log"]) for r in recs if "forward_log" in r]
            for name, recs in records.items()}
    table, fit = fit_cost_table([log for ls in logs.values() for log in ls], calibration)
    summary.update(cost_table=table.to_dict(), calibration=calibration.to_dict(), cost_fit=fit,
                   cost_table_monotone=not any(fit["monotone_violations"].values()))
    for name, recs in records.items():
        if recs and len(logs[name]) == len(recs) and name in summary["datasets"]:
            summary["datasets"][name]["modeled_s"] = sum(table(log) for log in logs[name])


def write_summaries(out_dir: Path, summary: dict, progress: Progress,
                    dataset: str | None = None) -> None:
    """Mark ``summary`` complete or not (in place) and write ``summary.json``; with ``dataset``,
    also ``summary/<dataset>.json`` (that dataset alone, complete)."""
    done = list(summary["datasets"])
    summary.update(complete=set(done) == set(progress), datasets_done=done, progress=progress)
    if dataset is not None:
        assert progress[dataset]["recorded"] == progress[dataset]["expected"], progress[dataset]
        write_json(out_dir / "summary" / f"{dataset}.json",
                   {**summary, "datasets": {dataset: summary["datasets"][dataset]},
                    "complete": True, "datasets_done": [dataset],
                    "progress": {dataset: progress[dataset]}})
    write_json(out_dir / "summary.json", summary)
