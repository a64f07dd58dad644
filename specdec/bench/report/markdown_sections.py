"""The leaderboard's Markdown sections about single rows: a per-category table for each row
whose dataset has categories, the greedy mismatches against ``ar`` with their prompts, and the
rows whose timing is unreliable with the reasons (``markdown.to_markdown`` places them).
"""

from __future__ import annotations

from specdec.bench.report.categories import categories
from specdec.bench.report.markdown_cells import table, value_cell
from specdec.bench.report.row import Row

CATEGORY_COLUMNS = [
    ("prompts", "prompts", "{:.0f}"),
    ("block_efficiency", "τ", "{:.2f}"),
    ("acceptance_rate", "accept", "{:.3f}"),
    ("speedup", "speedup", "{:.2f}x"),
    ("modeled_speedup_vs_ar", "modeled speedup vs ar", "{:.2f}x"),
]
MAX_LISTED = 10  # mismatching prompt ids listed per row


def category_tables(rows: list[Row]) -> list[str]:
    """A per-category table for each row whose dataset has two categories or more."""
    lines: list[str] = []
    for r in rows:
        cats = categories(r)
        if not cats:
            continue
        withheld = r.claims_withheld  # no speedup claimed for the row
        body = [
            [
                cat,
                *[
                    "unreliable"
                    if withheld and "speedup" in key
                    else value_cell(
                        values[key][0], fmt, None if key == "prompts" else values[key][1]
                    )
                    for key, _, fmt in CATEGORY_COLUMNS
                ],
            ]
            for cat, values in cats.items()
        ]
        lines += [
            "",
            f"### {r.label} on {r.dataset}",
            "",
            *table(["category", *[c[1] for c in CATEGORY_COLUMNS]], body, left=1),
        ]
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
        lines.append(
            f"- {r.label} on {r.dataset}: {len(ids)} of {r.greedy.prompts} prompts "
            f"differ from {r.greedy.baseline}: " + ", ".join(ids[:MAX_LISTED]) + more
        )
    lines += [
        "",
        "Greedy speculative decoding must reproduce AR token for token; the only "
        "excuse is a floating-point near-tie of the two largest logits (bf16, rarely fp32) "
        "flipped by scoring several tokens in one forward. Check such prompts in fp64 "
        "(model dtype) before trusting the method's numbers.",
    ]
    return lines


def timing_section(rows: list[Row]) -> list[str]:
    """The rows whose timing is unreliable, with the reasons."""
    bad = [r for r in rows if r.unreliable]
    if not bad:
        return []
    withheld = any(r.claims_withheld for r in bad)
    lines = ["", "## ✗ Unreliable timing" + (" (no speedup claimed)" if withheld else ""), ""]
    lines += [f"- {r.label} on {r.dataset}: " + "; ".join(r.unreliable) for r in bad]
    return lines + [
        "",
        "A run's forward times back a speedup only when its cost table grows "
        "with the tokens of a forward (within its noise), agrees with the "
        "calibration, the machine was not loaded beyond the run's own threads at "
        "its start and end, and (against `ar`) both runs' calibrations agree: "
        "rerun on a quiet machine.",
    ]
