"""PNG plots of a leaderboard (``specdec.report``): speedup and block-efficiency bars per dataset,
per-position acceptance curves. Uses matplotlib's object API (no pyplot global state); each
function returns its ``Figure`` (``notebooks/analysis.ipynb`` shows it) and writes a PNG when given
a path. A method row keeps one colour in every plot (``colours``: by its label's place among all
the rows' labels, not among the lines one plot happens to draw)."""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator


def _label(row) -> str:
    return row.label or row.run.method


def colours(rows) -> dict[str, str]:
    """One matplotlib colour (``C0``, ``C1``, ...) per row label, the same in every plot."""
    return {label: f"C{i % 10}" for i, label in enumerate(sorted({_label(r) for r in rows}))}


def bars(rows, value, title: str, ylabel: str, path: Path | None = None) -> Figure:
    """Grouped bars: x = dataset, one bar per method run (missing or refused values skipped)."""
    datasets = sorted({r.dataset for r in rows})
    labels = sorted({_label(r) for r in rows})
    fig = Figure(figsize=(max(6.0, 1.2 * len(datasets) * max(1, len(labels)) ** 0.5), 4.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width, colour = 0.8 / max(1, len(labels)), colours(rows)
    for j, label in enumerate(labels):
        xs, ys = [], []
        for i, d in enumerate(datasets):
            v = next((value(r) for r in rows if r.dataset == d and _label(r) == label), None)
            if v is not None and not math.isnan(v):
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(v)
        ax.bar(xs, ys, width=width, label=label, color=colour[label])
    ax.set_xticks(range(len(datasets)), datasets, rotation=20)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def acceptance_curves(rows, path: Path | None = None) -> Figure:
    """One panel per dataset: acceptance rate at draft position j+1, one line per method run."""
    datasets = sorted({r.dataset for r in rows})
    cols = min(3, len(datasets))
    nrows = math.ceil(len(datasets) / cols)
    fig = Figure(figsize=(4.0 * cols, 3.2 * nrows))
    FigureCanvasAgg(fig)
    colour = colours(rows)
    for k, d in enumerate(datasets):
        ax = fig.add_subplot(nrows, cols, k + 1)
        for r in rows:
            curve = r.metrics.get("per_position_acceptance") or []
            if r.dataset == d and curve:
                ax.plot(range(1, len(curve) + 1), curve, marker="o", label=_label(r),
                        color=colour[_label(r)])
        ax.set_title(d)
        ax.set_xlabel("draft position")
        ax.set_ylabel("acceptance")
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def plot_all(rows, out_dir: Path) -> list[Path]:
    """Write ``speedup.png``, ``block_efficiency.png`` and ``acceptance.png`` into ``out_dir``."""
    out = [out_dir / "speedup.png", out_dir / "block_efficiency.png", out_dir / "acceptance.png"]
    bars(rows, lambda r: r.speedup, "Speedup vs ar", "speedup (x)", out[0])
    bars(rows, lambda r: r.metrics.get("block_efficiency"), "Block efficiency",
         "new tokens / target forward", out[1])
    acceptance_curves(rows, out[2])
    return out
