"""The leaderboard as Markdown: the main table, a speedup pivot, counters, refusals, notes.

Undefined metrics (``null`` in the JSON, e.g. AR's acceptance rate) show as ``-``.
"""

from __future__ import annotations

import math

from specdec.bench.rows import Row

COLUMNS = [  # (metric key, header, format)
    ("tokens_per_s", "tokens/s", "{:.1f}"),
    ("speedup", "speedup", "{:.2f}x"),
    ("block_efficiency", "τ", "{:.2f}"),
    ("acceptance_rate", "accept", "{:.3f}"),
    ("rollback_rate", "rollback", "{:.3f}"),
    ("discard_rate", "discard", "{:.3f}"),
    ("verification_rate", "verif.", "{:.3f}"),
]


def _fmt(value, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


def to_markdown(rows: list[Row]) -> str:
    """The leaderboard, a speedup pivot (method × dataset) and the list of refused comparisons."""
    quality = sorted({k for r in rows for k in r.metrics if k.startswith("quality_")})
    modeled = any("modeled_s" in r.metrics for r in rows)
    priced = any(r.modeled_speedup is not None for r in rows)
    header = ["method", "dataset", "lossless", "prompts", "complete", *[c[1] for c in COLUMNS]]
    header += (["modeled speedup"] if priced else []) + (["modeled/wall"] if modeled else [])
    header += [q.removeprefix("quality_") for q in quality]
    lines = ["## Leaderboard", "", "| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
    for r in rows:
        values = {**r.metrics, "speedup": r.speedup}
        cells = [r.label, r.dataset, "yes" if r.run.summary.get("lossless") else "no",
                 str(r.metrics.get("prompts", "-")), "no" if r.run.incomplete else "yes"]
        for key, _, fmt in COLUMNS:
            cells.append("refused" if key == "speedup" and r.refused and r.speedup is None
                         else _fmt(values.get(key), fmt))
        if priced:
            cells.append(_fmt(r.modeled_speedup, "{:.2f}x"))
        if modeled:
            m, w = r.metrics.get("modeled_s"), r.metrics.get("wall_s")
            cells.append(_fmt(m / w if m is not None and w else None, "{:.2f}"))
        cells += [_fmt(r.metrics.get(q), "{:.3f}") for q in quality]
        lines.append("| " + " | ".join(cells) + " |")
    datasets = sorted({r.dataset for r in rows})
    methods = sorted({r.label for r in rows})
    lines += ["", "## Speedup vs `ar` (method × dataset)", "",
              "| method | " + " | ".join(datasets) + " |",
              "|---|" + "---:|" * len(datasets)]
    for m in methods:
        cells = []
        for d in datasets:
            found = [r for r in rows if r.label == m and r.dataset == d]
            cells.append(", ".join(_fmt(r.speedup, "{:.2f}x") if not r.refused else "refused"
                                   for r in found) or "")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    counted = [r for r in rows if r.metrics.get("counters")]
    if counted:
        lines += ["", "## Method counters (summed over prompts)", ""]
        lines += [f"- {r.label} on {r.dataset}: " + ", ".join(
            f"{k}={v}" for k, v in r.metrics["counters"].items()) for r in counted]
    incomplete = {r.run.path: r.run.incomplete for r in rows if r.run.incomplete}
    if incomplete:
        lines += ["", "## Incomplete runs (rows show the datasets they finished)", ""]
        lines += [f"- {path}: {why}" for path, why in incomplete.items()]
    refused = [r for r in rows if r.refused]
    if refused:
        lines += ["", "## Refused comparisons", ""]
        lines += [f"- {r.label} on {r.dataset} ({r.run.path}): {r.refused}" for r in refused]
    lines += ["", "Speedup = baseline wall_s / method wall_s (decoding only, prefill excluded, "
              "warm-up excluded); τ = mean accepted length = new tokens / target forwards "
              "(block efficiency: accepted + the recovered or bonus token per verification)."]
    if priced:
        lines += ["Modeled speedup = the baseline's forwards / the method's forwards, both priced "
                  "by the method run's calibrated cost table (one calibration, so machine-speed "
                  "drift between the runs cancels); modeled/wall checks that table against the "
                  "run's own clock."]
    return "\n".join(lines) + "\n"

