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

from specdec.bench.report.categories import categories
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
E2E_COLUMNS = [("e2e_tokens_per_s", "e2e tokens/s", "{:.1f}"),  # runs that record them
               ("e2e_speedup", "e2e speedup", "{:.2f}x")]
CATEGORY_COLUMNS = [("prompts", "prompts", "{:.0f}"), ("block_efficiency", "τ", "{:.2f}"),
                    ("acceptance_rate", "accept", "{:.3f}"), ("speedup", "speedup", "{:.2f}x"),
                    ("modeled_speedup_vs_ar", "modeled speedup vs ar", "{:.2f}x")]
MAX_LISTED = 10  # mismatching prompt ids listed per row


def _fmt(value, fmt: str, std: float | None = None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    text = fmt.format(value)
    return text if std is None else f"{text} ± {fmt.removesuffix('x').format(std)}"


def _table(header: list[str], body: list[list[str]], left: int = 2) -> list[str]:
    return ["| " + " | ".join(header) + " |",
            "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|",
            *["| " + " | ".join(cells) + " |" for cells in body]]


def greedy_cell(r: Row) -> str:
    """``1.000``, or the share of equal outputs marked ``✗`` below 1 (``-``: not compared)."""
    if r.greedy is None:
        return "-"
    text = f"{r.greedy.fraction:.3f}"
    return text if r.greedy.equal == r.greedy.prompts else f"**{text} ✗**"


def _claim(r: Row, value, fmt: str, std: float | None = None) -> str:
    """A speedup cell: the value, or ``unreliable`` where the row's timing withheld it."""
    if value is None and r.claims_withheld:
        return "unreliable"
    return _fmt(value, fmt, std)


def timing_cell(r: Row) -> str:
    """``ok``, ``**unreliable ✗**`` or ``-`` (not checked)."""
    return "**unreliable ✗**" if r.unreliable else ("ok" if r.checked else "-")


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
    header = ["method", "dataset", "lossless", *(["runs"] if repeated else []), "prompts",
              "complete", *(["timing"] if timed else []), *[c[1] for c in columns],
              *(["hit rate"] if hits else []), *(["branches/step"] if branches else [])]
    header += (["modeled speedup vs ar"] if priced else []) + (["modeled/wall"] if modeled else [])
    header += (["greedy = ar"] if greedy else []) + [q.removeprefix("quality_") for q in quality]
    body = []
    for r in rows:
        values = {**r.metrics, "speedup": r.speedup, "e2e_speedup": r.e2e_speedup}
        prompts = r.run.summary.datasets[r.dataset].get("prompts", "-")
        cells = [r.label, r.dataset, "yes" if r.run.summary.lossless else "no",
                 *([str(len(r.runs))] if repeated else []), str(prompts),
                 "no" if _incomplete(r) else "yes", *([timing_cell(r)] if timed else [])]
        for key, _, fmt in columns:
            cells.append("refused" if key == "speedup" and r.refused and r.speedup is None
                         else _claim(r, values.get(key), fmt, r.std.get(key))
                         if key == "speedup" else _fmt(values.get(key), fmt, r.std.get(key)))
        if hits:
            cells.append(_fmt(r.metrics.get("hit_rate"), "{:.3f}", r.std.get("hit_rate")))
        if branches:
            cells.append(_fmt(r.metrics.get("branches_per_step"), "{:.2f}",
                              r.std.get("branches_per_step")))
        if priced:
            cells.append(_claim(r, r.modeled_speedup_vs_ar, "{:.2f}x",
                                r.std.get("modeled_speedup_vs_ar")))
        if modeled:
            m, w = r.metrics.get("modeled_s"), r.metrics.get("wall_s")
            cells.append(_fmt(m / w if m is not None and w else None, "{:.2f}"))
        cells += [greedy_cell(r)] if greedy else []
        cells += [_fmt(r.metrics.get(q), "{:.3f}", r.std.get(q)) for q in quality]
        body.append(cells)
    return _table(header, body)


def pivot(rows: list[Row]) -> list[str]:
    """Speedup vs the baseline, method × dataset."""
    datasets = sorted({r.dataset for r in rows})
    body = []
    for m in sorted({r.label for r in rows}):
        cells = [m]
        for d in datasets:
            found = [r for r in rows if r.label == m and r.dataset == d]
            cells.append(", ".join(_claim(r, r.speedup, "{:.2f}x", r.std.get("speedup"))
                                   if not r.refused else "refused" for r in found))
        body.append(cells)
    return _table(["method", *datasets], body, left=1)


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
        body.append([m, *[_claim(own[d], values[d], "{:.2f}x") if d in own else "-"
                          for d in datasets],
                     "unreliable" if any(r.claims_withheld for r in own.values()) and mean is None
                     else _fmt(mean, "{:.4f}x")])
    return ["", "## Modeled speedup vs `ar` (method × dataset; mean = the sweep objective)", "",
            *_table(["method", *datasets, "mean"], body, left=1)]


def category_tables(rows: list[Row]) -> list[str]:
    """A per-category table for each row whose dataset has two categories or more."""
    lines: list[str] = []
    for r in rows:
        cats = categories(r)
        if not cats:
            continue
        withheld = r.claims_withheld  # no speedup claimed for the row
        body = [[cat, *["unreliable" if withheld and "speedup" in key
                        else _fmt(values[key][0], fmt, None if key == "prompts" else values[key][1])
                        for key, _, fmt in CATEGORY_COLUMNS]] for cat, values in cats.items()]
        lines += ["", f"### {r.label} on {r.dataset}", "",
                  *_table(["category", *[c[1] for c in CATEGORY_COLUMNS]], body, left=1)]
    return ["", "## Per category"] + lines if lines else []


def greedy_section(rows: list[Row]) -> list[str]:
    """The rows whose temperature-0 outputs differ from the baseline's, with the prompts."""
    bad = [r for r in rows if r.greedy is not None and r.greedy.equal < r.greedy.prompts]
    if not bad:
        return []
    lines = ["", "## ✗ Greedy mismatches (temperature 0: outputs must equal `ar`'s)", ""]
    for r in bad:
        ids = r.greedy.mismatched
        more = f" and {len(ids) - MAX_LISTED} more" if len(ids) > MAX_LISTED else ""
        lines.append(f"- {r.label} on {r.dataset}: {len(ids)} of {r.greedy.prompts} prompts "
                     f"differ from {r.greedy.baseline}: " + ", ".join(ids[:MAX_LISTED]) + more)
    lines += ["", "Greedy speculative decoding must reproduce AR token for token; the only "
              "excuse is a floating-point near-tie of the two largest logits (bf16, rarely fp32) "
              "flipped by scoring several tokens in one forward. Check such prompts in fp64 "
              "(model dtype) before trusting the method's numbers."]
    return lines


def timing_section(rows: list[Row]) -> list[str]:
    """The rows whose timing is unreliable, with the reasons."""
    bad = [r for r in rows if r.unreliable]
    if not bad:
        return []
    withheld = any(r.claims_withheld for r in bad)
    lines = ["", "## ✗ Unreliable timing" + (" (no speedup claimed)" if withheld else ""), ""]
    lines += [f"- {r.label} on {r.dataset}: " + "; ".join(r.unreliable) for r in bad]
    return lines + ["", "A run's forward times back a speedup only when its cost table grows "
                    "with the tokens of a forward (within its noise), agrees with the "
                    "calibration, the machine was not loaded beyond the run's own threads at "
                    "its start and end, and (against `ar`) both runs' calibrations agree: "
                    "rerun on a quiet machine."]


def to_markdown(rows: list[Row], *, skipped: list[str] = (), copies: list[str] = (),
                doubts: list[str] = ()) -> str:
    """The leaderboard and its companion sections (see the module docstring); ``skipped``: the
    unreadable summaries left out, ``copies``: the run folders counted once, ``doubts``: the
    summaries' claims their records contradict and cut-off record lines
    (``specdec.bench.report.audit``)."""
    lines = ["## Leaderboard", "", *main_table(rows), "", "## Speedup vs `ar` (method × dataset)",
             "", *pivot(rows), *modeled_pivot(rows), *category_tables(rows),
             *(per_context_tables(rows) if e2e(rows) else [])]
    counted = [r for r in rows if r.metrics.get("counters")]
    if counted:
        lines += ["", "## Method counters (summed over prompts)", ""]
        lines += [f"- {r.label} on {r.dataset}: " + ", ".join(
            f"{k}={v}" for k, v in r.metrics["counters"].items()) for r in counted]
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
        lines += ["", "## ✗ Summaries against their records (the records' counts are shown)",
                  "", *[f"- {x}" for x in doubts]]
    lines += timing_section(rows)
    refused = [r for r in rows if r.refused]
    if refused:
        lines += ["", "## Refused comparisons", ""]
        lines += [f"- {r.label} on {r.dataset} ({r.run.path}): {r.refused}" for r in refused]
    lines += ["", "Speedup = baseline wall_s per new token / method wall_s per new token "
              "(decoding only, prefill excluded, warm-up excluded; per token because sampled "
              "outputs differ in length); τ = mean accepted length = new tokens / target forwards "
              "(block efficiency: accepted + the recovered or bonus token per verification)."]
    if e2e(rows):
        lines += ["e2e tokens/s and e2e speedup include prefill (the target's and the drafter's, "
                  "per turn: Spec-Bench's convention; seconds per new token as above)."]
    if any("hit_rate" in r.metrics for r in rows):
        lines += ["Methods that draft ahead of verification (a hit rate is shown): rollback = "
                  "drafted-but-discarded / drafted over every token the draft made, rolled-back "
                  "blocks included; hit rate = hits / (hits + misses), the steps whose "
                  "background work was used (PEARL: its block; SSD: the cached chain of the "
                  "verdict's outcome, the cache hit rate) over the steps that looked."]
    if any(r.modeled_speedup_vs_ar is not None for r in rows):
        lines += ["Modeled speedup vs ar = the baseline's forwards / the method's forwards per new "
                  "token, both priced "
                  "by one cost table fitted on both runs' forward logs (one price list for both "
                  "sides); modeled/wall checks the run's own table against its clock (below 1 by "
                  "the time spent outside forwards; for methods that draft ahead, the modeled "
                  "clock overlaps the two lanes as two devices would). A run's summary also "
                  "holds self_modeled_speedup, its own estimate against AR-equivalent forwards "
                  "without an `ar` run: another number, not shown here."]
    if any(r.members for r in rows):
        lines += ["Rows with runs > 1 merge runs that differ only in their seed: mean ± sample "
                  "standard deviation over the runs, each speedup paired with the `ar` run of "
                  "the same seed."]
    return "\n".join(lines) + "\n"
