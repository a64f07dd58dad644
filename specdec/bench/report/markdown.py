"""The leaderboard as Markdown: the main table, speedup pivots (wall; modeled with its mean over
the datasets, the number a sweep maximises), per-category tables, counters, greedy mismatches,
unreadable inputs and copies left out, incomplete runs, refusals and the definitions.

Undefined metrics (``null`` in the JSON, e.g. AR's acceptance rate) show as ``-``. A row merging
repeats (``specdec.bench.report.repeats``) shows ``mean ± std`` and its number of runs in ``runs``.
``greedy = ar`` (temperature-0 runs only, ``specdec.bench.report.greedy``) is the share of prompts
whose output token ids equal the ``ar`` run's; below 1 it is marked ``✗`` and the mismatching
prompts are listed.

Timing (``specdec.bench.timing``): once any row's run had its timing checked, a ``timing`` column
says ``ok`` or ``unreliable ✗``; an unreliable row's speedup cells say ``unreliable`` instead of a
number (``SPECDEC_TIMING=lenient``: the number stays beside the flag) and its reasons are listed
under "Unreliable timing".
"""

from __future__ import annotations

import math

from specdec.bench.report.markdown_cells import (
    claim_cell,
    greedy_cell,
    table,
    timing_cell,
    value_cell,
)
from specdec.bench.report.markdown_sections import (
    category_tables,
    greedy_section,
    timing_section,
)
from specdec.bench.report.per_context import per_context_tables
from specdec.bench.report.row import Row

COLUMNS = [  # (metric key, header, format)
    ("tokens_per_s", "tokens/s", "{:.1f}"),
    ("speedup", "speedup", "{:.2f}x"),
    ("block_efficiency", "τ", "{:.2f}"),
    ("acceptance_rate", "accept", "{:.3f}"),
    ("rollback_rate", "rollback", "{:.3f}"),
    ("discard_rate", "discard", "{:.3f}"),
    ("verification_rate", "verif.", "{:.3f}"),
]
E2E_COLUMNS = [
    ("e2e_tokens_per_s", "e2e tokens/s", "{:.1f}"),  # runs that record them
    ("e2e_speedup", "e2e speedup", "{:.2f}x"),
]


def _incomplete(r: Row) -> list[str]:
    return [f"{run.path}: {run.incomplete}" for run in r.runs if run.incomplete]


def e2e(rows: list[Row]) -> bool:
    """Whether any row's run recorded end-to-end speed (``specdec.bench.run.e2e``; older runs'
    reports stay as they were)."""
    return any("e2e_tokens_per_s" in r.metrics for r in rows)


def main_table(rows: list[Row]) -> list[str]:
    """The leaderboard table, one line per row."""
    quality = sorted({k for r in rows for k in r.metrics if k.startswith("quality_")})
    modeled = any("modeled_s" in r.metrics for r in rows)
    priced = any(r.modeled_speedup_vs_ar is not None or r.claims_withheld for r in rows)
    timed = any(r.checked for r in rows)
    repeated = any(r.members for r in rows)
    greedy = any(r.greedy is not None for r in rows)
    hits = any("hit_rate" in r.metrics for r in rows)  # methods that draft ahead
    branches = any("branches_per_step" in r.metrics for r in rows)  # SpecBranch
    columns = [*COLUMNS[:2], *(E2E_COLUMNS if e2e(rows) else []), *COLUMNS[2:]]
    header = [
        "method",
        "dataset",
        "lossless",
        *(["runs"] if repeated else []),
        "prompts",
        "complete",
        *(["timing"] if timed else []),
        *[c[1] for c in columns],
        *(["hit rate"] if hits else []),
        *(["branches/step"] if branches else []),
    ]
    header += (["modeled speedup vs ar"] if priced else []) + (["modeled/wall"] if modeled else [])
    header += (["greedy = ar"] if greedy else []) + [q.removeprefix("quality_") for q in quality]
    body = []
    for r in rows:
        values = {**r.metrics, "speedup": r.speedup, "e2e_speedup": r.e2e_speedup}
        prompts = r.run.summary.datasets[r.dataset].get("prompts", "-")
        cells = [
            r.label,
            r.dataset,
            "yes" if r.run.summary.lossless else "no",
            *([str(len(r.runs))] if repeated else []),
            str(prompts),
            "no" if _incomplete(r) else "yes",
            *([timing_cell(r)] if timed else []),
        ]
        for key, _, fmt in columns:
            cells.append(
                "refused"
                if key == "speedup" and r.refused and r.speedup is None
                else claim_cell(r, values.get(key), fmt, r.std.get(key))
                if key == "speedup"
                else value_cell(values.get(key), fmt, r.std.get(key))
            )
        if hits:
            cells.append(value_cell(r.metrics.get("hit_rate"), "{:.3f}", r.std.get("hit_rate")))
        if branches:
            cells.append(
                value_cell(
                    r.metrics.get("branches_per_step"), "{:.2f}", r.std.get("branches_per_step")
                )
            )
        if priced:
            cells.append(
                claim_cell(
                    r, r.modeled_speedup_vs_ar, "{:.2f}x", r.std.get("modeled_speedup_vs_ar")
                )
            )
        if modeled:
            m, w = r.metrics.get("modeled_s"), r.metrics.get("wall_s")
            cells.append(value_cell(m / w if m is not None and w else None, "{:.2f}"))
        cells += [greedy_cell(r)] if greedy else []
        cells += [value_cell(r.metrics.get(q), "{:.3f}", r.std.get(q)) for q in quality]
        body.append(cells)
    return table(header, body)


def pivot(rows: list[Row]) -> list[str]:
    """Speedup vs the baseline, method × dataset."""
    datasets = sorted({r.dataset for r in rows})
    body = []
    for m in sorted({r.label for r in rows}):
        cells = [m]
        for d in datasets:
            found = [r for r in rows if r.label == m and r.dataset == d]
            cells.append(
                ", ".join(
                    claim_cell(r, r.speedup, "{:.2f}x", r.std.get("speedup"))
                    if not r.refused
                    else "refused"
                    for r in found
                )
            )
        body.append(cells)
    return table(["method", *datasets], body, left=1)


def modeled_pivot(rows: list[Row]) -> list[str]:
    """Modeled speedup vs the baseline, method × dataset, and its mean over the datasets: what a
    sweep of that method's run maximises (``sweep_objective``, ``specdec.bench.run.paired``)."""
    if not any(r.modeled_speedup_vs_ar is not None or r.claims_withheld for r in rows):
        return []
    datasets, body = sorted({r.dataset for r in rows}), []
    for m in sorted({r.label for r in rows}):
        own = {r.dataset: r for r in rows if r.label == m}
        values = {d: r.modeled_speedup_vs_ar for d, r in own.items()}
        known = [v for v in values.values() if v is not None and not math.isnan(v)]
        mean = sum(known) / len(known) if known and len(known) == len(values) else None
        body.append(
            [
                m,
                *[claim_cell(own[d], values[d], "{:.2f}x") if d in own else "-" for d in datasets],
                "unreliable"
                if any(r.claims_withheld for r in own.values()) and mean is None
                else value_cell(mean, "{:.4f}x"),
            ]
        )
    return [
        "",
        "## Modeled speedup vs `ar` (method × dataset; mean = the sweep objective)",
        "",
        *table(["method", *datasets, "mean"], body, left=1),
    ]


def to_markdown(
    rows: list[Row], *, skipped: list[str] = (), copies: list[str] = (), doubts: list[str] = ()
) -> str:
    """The leaderboard and its companion sections (see the module docstring); ``skipped``: the
    unreadable summaries left out, ``copies``: the run folders counted once, ``doubts``: the
    summaries' claims their records contradict and cut-off record lines
    (``specdec.bench.report.audit``)."""
    lines = [
        "## Leaderboard",
        "",
        *main_table(rows),
        "",
        "## Speedup vs `ar` (method × dataset)",
        "",
        *pivot(rows),
        *modeled_pivot(rows),
        *category_tables(rows),
        *(per_context_tables(rows) if e2e(rows) else []),
    ]
    counted = [r for r in rows if r.metrics.get("counters")]
    if counted:
        lines += ["", "## Method counters (summed over prompts)", ""]
        lines += [
            f"- {r.label} on {r.dataset}: "
            + ", ".join(f"{k}={v}" for k, v in r.metrics["counters"].items())
            for r in counted
        ]
    lines += greedy_section(rows)
    incomplete = dict.fromkeys(line for r in rows for line in _incomplete(r))
    if incomplete:
        lines += ["", "## Incomplete runs (rows show the datasets they finished)", ""]
        lines += [f"- {line}" for line in incomplete]
    if skipped:
        lines += ["", "## ✗ Unreadable summaries (skipped)", "", *[f"- {x}" for x in skipped]]
    if copies:
        lines += ["", "## Copies of a run (counted once)", "", *[f"- {x}" for x in copies]]
    if doubts:
        lines += [
            "",
            "## ✗ Summaries against their records (the records' counts are shown)",
            "",
            *[f"- {x}" for x in doubts],
        ]
    lines += timing_section(rows)
    refused = [r for r in rows if r.refused]
    if refused:
        lines += ["", "## Refused comparisons", ""]
        lines += [f"- {r.label} on {r.dataset} ({r.run.path}): {r.refused}" for r in refused]
    lines += [
        "",
        "Speedup = baseline wall_s per new token / method wall_s per new token "
        "(decoding only, prefill excluded, warm-up excluded; per token because sampled "
        "outputs differ in length); τ = mean accepted length = new tokens / target forwards "
        "(block efficiency: accepted + the recovered or bonus token per verification).",
    ]
    if e2e(rows):
        lines += [
            "e2e tokens/s and e2e speedup include prefill (the target's and the drafter's, "
            "per turn: Spec-Bench's convention; seconds per new token as above)."
        ]
    if any("hit_rate" in r.metrics for r in rows):
        lines += [
            "Methods that draft ahead of verification (a hit rate is shown): rollback = "
            "drafted-but-discarded / drafted over every token the draft made, rolled-back "
            "blocks included; hit rate = hits / (hits + misses), the steps whose "
            "background work was used (PEARL: its block; SSD: the cached chain of the "
            "verdict's outcome, the cache hit rate) over the steps that looked."
        ]
    if any(r.modeled_speedup_vs_ar is not None for r in rows):
        lines += [
            "Modeled speedup vs ar = the baseline's forwards / the method's forwards per new "
            "token, both priced "
            "by one cost table fitted on both runs' forward logs (one price list for both "
            "sides); modeled/wall checks the run's own table against its clock (below 1 by "
            "the time spent outside forwards; for methods that draft ahead, the modeled "
            "clock overlaps the two lanes as two devices would). A run's summary also "
            "holds self_modeled_speedup, its own estimate against AR-equivalent forwards "
            "without an `ar` run: another number, not shown here."
        ]
    if any(r.members for r in rows):
        lines += [
            "Rows with runs > 1 merge runs that differ only in their seed: mean ± sample "
            "standard deviation over the runs, each speedup paired with the `ar` run of "
            "the same seed."
        ]
    return "\n".join(lines) + "\n"
