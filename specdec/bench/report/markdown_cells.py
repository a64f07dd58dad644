"""Markdown cells and tables of the leaderboard: a value (``-`` when undefined, ``mean ± std`` for
merged repeats), a speedup claim (``unreliable`` where the row's timing withheld it), the greedy
and timing flags, and a pipe table. ``markdown`` and ``markdown_sections`` write with them.
"""

from __future__ import annotations

import math

from specdec.bench.report.row import Row


def value_cell(value, fmt: str, std: float | None = None) -> str:
    """``value`` in ``fmt`` (``-``: undefined), ``± std`` beside it when given."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    text = fmt.format(value)
    return text if std is None else f"{text} ± {fmt.removesuffix('x').format(std)}"


def table(header: list[str], body: list[list[str]], left: int = 2) -> list[str]:
    """A pipe table: its first ``left`` columns left-aligned, the others right-aligned."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|",
        *["| " + " | ".join(cells) + " |" for cells in body],
    ]


def greedy_cell(r: Row) -> str:
    """``1.000``, or the share of equal outputs marked ``✗`` below 1 (``-``: not compared)."""
    if r.greedy is None:
        return "-"
    text = f"{r.greedy.fraction:.3f}"
    return text if r.greedy.equal == r.greedy.prompts else f"**{text} ✗**"


def claim_cell(r: Row, value, fmt: str, std: float | None = None) -> str:
    """A speedup cell: the value, or ``unreliable`` where the row's timing withheld it."""
    if value is None and r.claims_withheld:
        return "unreliable"
    return value_cell(value, fmt, std)


def timing_cell(r: Row) -> str:
    """``ok``, ``**unreliable ✗**`` or ``-`` (not checked)."""
    return "**unreliable ✗**" if r.unreliable else ("ok" if r.checked else "-")
