"""Per-category numbers of a leaderboard row, from its records (Spec-Bench's per-task table).

Spec-Bench (Xia et al. 2024, arXiv:2401.07851) reports each method per task category: multi-turn
conversation (its MT-bench items), translation, summarization, question answering, mathematical
reasoning and retrieval-augmented generation. Every record carries its prompt's ``category`` and
number of ``turns``; a record with more than one turn counts as ``multi-turn`` (Spec-Bench's
grouping of MT-bench's eight categories), any other by its own category (the rule of
``specdec.data.prompts.report_category``, which ``per_category=N`` balances on). A dataset whose
records fall into two categories or more gets a table per method row: prompts, τ (block efficiency),
acceptance rate and, when the row has a baseline run (``ar``), the speedups over the category's
prompts:

* speedup = Σ baseline ``wall_s`` / Σ method ``wall_s`` over the category's prompts;
* modeled speedup vs ar = the baseline's forward profiles / the method's forward logs, both
  priced by the method run's cost table (as ``specdec.bench.report.rows.paired_modeled_speedup``,
  restricted to the category).

A row that merges repeats (``specdec.bench.report.repeats``) shows each number's mean ± std over its
runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specdec.bench.costfit import record_modeled_s
from specdec.bench.pricing import CostTable, merge_profiles
from specdec.bench.report.repeats import mean_std
from specdec.data.prompts import MULTI_TURN as MULTI_TURN  # re-exported: the category's name
from specdec.data.prompts import category_for
from specdec.metrics import GenerationStats, summarize

if TYPE_CHECKING:
    from specdec.bench.report.row import Row

KEYS = ("prompts", "block_efficiency", "acceptance_rate", "speedup", "modeled_speedup_vs_ar")
Values = dict[str, float | None]


def category_of(record: dict) -> str:
    """The category a record is reported under (see the module docstring)."""
    return category_for(str(record.get("category")), int(record.get("turns", 1)))


def _speedups(records: list[dict], base: list[dict], cost: CostTable | None) -> Values:
    wall = sum(r["wall_s"] for r in records)
    out: Values = {
        "speedup": sum(b["wall_s"] for b in base) / wall if wall else float("nan"),
        "modeled_speedup_vs_ar": None,
    }
    if (
        cost is not None
        and all("forward_profile" in b for b in base)
        and all("forward_log" in r for r in records)
    ):
        own = sum(record_modeled_s(r, cost) for r in records)
        theirs = cost.price(merge_profiles(b["forward_profile"] for b in base))
        out["modeled_speedup_vs_ar"] = theirs / own if own else float("nan")
    return out


def run_categories(row: Row) -> dict[str, Values]:
    """Per category of one run's row: the ``KEYS`` values (empty: fewer than two categories)."""
    by_cat: dict[str, list[dict]] = {}
    for rec in row.run.records(row.dataset):
        by_cat.setdefault(category_of(rec), []).append(rec)
    if len(by_cat) < 2:
        return {}
    base = (
        {r["prompt_id"]: r for r in row.baseline.records(row.dataset)}
        if row.baseline is not None
        else {}
    )
    # the dataset's own table (price_run), else the run-wide one (summaries before per-dataset fits)
    table = (row.run.summary.cost_tables or {}).get(row.dataset, row.run.summary.cost_table)
    cost = CostTable.from_dict(table) if table else None
    out: dict[str, Values] = {}
    for cat in sorted(by_cat):
        # 1. The category's own metrics, 2. speedups when the baseline has every prompt.
        records = by_cat[cat]
        metrics = summarize([GenerationStats.from_record(r) for r in records])
        values: Values = {
            "prompts": len(records),
            "speedup": None,
            "modeled_speedup_vs_ar": None,
            "block_efficiency": metrics["block_efficiency"],
            "acceptance_rate": metrics["acceptance_rate"],
        }
        theirs = [base.get(r["prompt_id"]) for r in records]
        if base and all(b is not None for b in theirs):
            values.update(_speedups(records, [b for b in theirs if b is not None], cost))
        out[cat] = values
    return out


def categories(row: Row) -> dict[str, dict[str, tuple[float | None, float | None]]]:
    """Per category: ``{key: (mean, std)}`` over the row's runs (std None for one run)."""
    per_run = [run_categories(m) for m in (row.members or [row])]
    if not per_run[0] or any(set(p) != set(per_run[0]) for p in per_run):
        return {}
    return {
        cat: {key: mean_std([p[cat][key] for p in per_run]) for key in KEYS} for cat in per_run[0]
    }
