"""Plots of a leaderboard (``specdec.report``): speedup and block-efficiency bars per dataset,
per-position acceptance curves, each written as a vector PDF (for a paper) and a 300-dpi PNG.

Uses matplotlib's object API (no pyplot global state); each function returns its ``Figure``
(``notebooks/analysis.ipynb`` shows it) and writes ``<stem>.pdf`` and ``<stem>.png`` when given a
path. A method keeps one colour in every plot of every leaderboard
(``specdec.bench.report.colours``: a fixed colour per method preset, never its place among the
rows a plot draws); several rows of one method differ by hatch or line style.

Error bars: a row merging repeats over seeds (``specdec.bench.report.repeats``) shows
``mean ± std`` in the table; its bar has the same sample standard deviation as a ± error bar
(``Row.std``; rows of a single run have none).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from specdec.bench.report.colours import HATCHES, LINESTYLES, styles
from specdec.bench.report.row import Row

DPI = 300  # of the PNG; the PDF is vector
FORMATS = ("pdf", "png")
Value = Callable[[Row], "float | None"]


def _label(row: Row) -> str:
    return row.label or row.run.method


def _styles(rows: list[Row]) -> dict[str, tuple[str, int]]:
    return styles((_label(r), r.run.method) for r in rows)


def colours(rows: list[Row]) -> dict[str, str]:
    """One matplotlib colour per row label, the same in every plot: its method's
    (``specdec.bench.report.colours.method_colour``)."""
    return {label: colour for label, (colour, _) in _styles(rows).items()}


def save(fig: Figure, path: Path) -> list[Path]:
    """Write ``fig`` as ``path`` with each suffix of ``FORMATS`` (PNG at ``DPI``); the paths."""
    out = [Path(path).with_suffix(f".{fmt}") for fmt in FORMATS]
    for file in out:
        fig.savefig(file, dpi=DPI, bbox_inches="tight")
    return out


def _number(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


def bars(
    rows: list[Row],
    value: Value,
    title: str,
    ylabel: str,
    path: Path | None = None,
    *,
    std: Value | None = None,
) -> Figure:
    """Grouped bars: x = dataset, one bar per method row (missing or refused values skipped),
    with ± ``std(row)`` error bars where it is known (the table's ± std of merged repeats)."""
    datasets = sorted({r.dataset for r in rows})
    labels = sorted({_label(r) for r in rows})
    fig = Figure(figsize=(max(6.0, 1.2 * len(datasets) * max(1, len(labels)) ** 0.5), 4.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width, style = 0.8 / max(1, len(labels)), _styles(rows)
    for j, label in enumerate(labels):
        # 1. This row's value (and spread) on each dataset it has one for.
        xs, ys, errs = [], [], []
        for i, d in enumerate(datasets):
            row = next((r for r in rows if r.dataset == d and _label(r) == label), None)
            v = value(row) if row is not None else None
            if _number(v):
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(v)
                s = std(row) if std is not None else None
                errs.append(s if _number(s) else 0.0)
        # 2. Its bars in its method's colour, with error bars where any spread is known.
        colour, k = style[label]
        ax.bar(
            xs,
            ys,
            width=width,
            label=label,
            color=colour,
            edgecolor="black",
            linewidth=0.4,
            hatch=HATCHES[k % len(HATCHES)],
            yerr=errs if any(errs) else None,
            capsize=3,
            error_kw={"elinewidth": 0.9, "ecolor": "black"},
        )
    ax.set_xticks(range(len(datasets)), datasets, rotation=20)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    if path is not None:
        save(fig, path)
    return fig


def acceptance_curves(rows: list[Row], path: Path | None = None) -> Figure:
    """One panel per dataset: acceptance rate at draft position j+1, one line per method row."""
    datasets = sorted({r.dataset for r in rows})
    cols = min(3, len(datasets))
    nrows = math.ceil(len(datasets) / cols)
    fig = Figure(figsize=(4.0 * cols, 3.2 * nrows))
    FigureCanvasAgg(fig)
    style = _styles(rows)
    for k, d in enumerate(datasets):
        ax = fig.add_subplot(nrows, cols, k + 1)
        for r in rows:
            curve = r.metrics.get("per_position_acceptance") or []
            if r.dataset == d and curve:
                colour, n = style[_label(r)]
                ax.plot(
                    range(1, len(curve) + 1),
                    curve,
                    marker="o",
                    label=_label(r),
                    color=colour,
                    linestyle=LINESTYLES[n % len(LINESTYLES)],
                )
        ax.set_title(d)
        ax.set_xlabel("draft position")
        ax.set_ylabel("acceptance")
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    fig.tight_layout()
    if path is not None:
        save(fig, path)
    return fig


def plot_all(rows: list[Row], out_dir: Path) -> list[Path]:
    """Write ``speedup``, ``block_efficiency`` and ``acceptance`` as PDF and PNG into
    ``out_dir``; the written paths."""
    bars(
        rows,
        lambda r: r.speedup,
        "Speedup vs ar",
        "speedup (x)",
        out_dir / "speedup",
        std=lambda r: r.std.get("speedup"),
    )
    bars(
        rows,
        lambda r: r.metrics.get("block_efficiency"),
        "Block efficiency",
        "new tokens / target forward",
        out_dir / "block_efficiency",
        std=lambda r: r.std.get("block_efficiency"),
    )
    acceptance_curves(rows, out_dir / "acceptance")
    return [
        out_dir / f"{stem}.{fmt}"
        for stem in ("speedup", "block_efficiency", "acceptance")
        for fmt in FORMATS
    ]
