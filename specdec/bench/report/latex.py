"""``leaderboard.tex``: the leaderboard's main table as a LaTeX ``tabular`` for a paper.

Written by ``specdec.bench.report.board`` beside ``leaderboard.md`` and ``leaderboard.csv``, with
pandas ``DataFrame.to_latex`` in booktabs style (``\\toprule``, ``\\midrule``, ``\\bottomrule``:
``\\usepackage{booktabs}`` in the paper). One line per leaderboard row: method, dataset,
``runs`` (when repeats were merged), tokens/s, speedup, τ, acceptance, and when measured the
modeled speedup vs ``ar`` and the quality checks. Merged repeats show ``mean $\\pm$ std`` (the
Markdown's ``±``); an undefined value is ``--``; a refused speedup says ``refused``.

Every text cell (method labels, dataset names, headers) is escaped for LaTeX
(``latex_escape``), so ``sps (run_b)`` or ``cnn_dailymail`` typeset as written; the numbers
and ``$\\pm$`` are the only markup the table holds.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from specdec.bench.report.row import Row

ESCAPES = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
COLUMNS = [  # (metric key, header, format); speedups read from the row, not its metrics
    ("tokens_per_s", "tokens/s", "{:.1f}"),
    ("speedup", "speedup", "{:.2f}"),
    ("block_efficiency", r"$\tau$", "{:.2f}"),
    ("acceptance_rate", "accept", "{:.3f}"),
    ("modeled_speedup_vs_ar", "modeled speedup", "{:.2f}"),
]


def latex_escape(text: str) -> str:
    """``text`` with each LaTeX special character written as the character it stands for."""
    return "".join(ESCAPES.get(c, c) for c in str(text))


def _cell(value: float | None, fmt: str, std: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    text = fmt.format(value)
    return text if std is None else f"{text} $\\pm$ {fmt.format(std)}"


def _value(r: Row, key: str) -> float | None:
    if key == "speedup":
        return r.speedup
    if key == "modeled_speedup_vs_ar":
        return r.modeled_speedup_vs_ar
    return r.metrics.get(key)


def frame(rows: list[Row]) -> pd.DataFrame:
    """The table as strings, headers and text escaped; columns no row has a value for are left
    out (``modeled speedup`` without a cost model, quality without checks)."""
    quality = sorted({k for r in rows for k in r.metrics if k.startswith("quality_")})
    columns = [*COLUMNS, *[(q, q.removeprefix("quality_"), "{:.3f}") for q in quality]]
    columns = [
        c for c in columns if any(_value(r, c[0]) is not None for r in rows) or c[0] == "speedup"
    ]
    repeated = any(r.members for r in rows)
    body = []
    for r in rows:
        line = [latex_escape(r.label or r.run.method), latex_escape(r.dataset)]
        line += [str(len(r.runs))] if repeated else []
        for key, _, fmt in columns:
            refused = key == "speedup" and r.refused and r.speedup is None
            line.append("refused" if refused else _cell(_value(r, key), fmt, r.std.get(key)))
        body.append(line)
    header = [
        "method",
        "dataset",
        *(["runs"] if repeated else []),
        *[h if h.startswith("$") else latex_escape(h) for _, h, _ in columns],
    ]
    return pd.DataFrame(body, columns=header)


def to_latex(rows: list[Row], caption: str | None = None) -> str:
    """The ``tabular`` (in a ``table`` float when ``caption`` is given) in booktabs style."""
    table = frame(rows)
    align = "ll" + "r" * (len(table.columns) - 2)
    return table.to_latex(
        index=False,
        escape=False,
        column_format=align,
        caption=latex_escape(caption) if caption else None,
        label="tab:leaderboard" if caption else None,
        position="t" if caption else None,
    )


def write_latex(rows: list[Row], path: str | Path) -> Path:
    """Write ``to_latex(rows)`` to ``path``."""
    path = Path(path)
    path.write_text(to_latex(rows), encoding="utf-8")
    return path
