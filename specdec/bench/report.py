"""``python -m specdec.report RUN_DIRS...``: merge eval runs into a Markdown leaderboard and plots.

Each run directory holds a ``summary.json`` written by ``specdec.eval`` (a folder given here is
searched recursively; ``specdec.bench.runs``). The leaderboard has one row per (method run,
dataset) with tokens/s, speedup, block efficiency, acceptance, rollback, discard and verification
rates (definitions in ``specdec.metrics``), ``modeled_s / wall_s`` when a cost model ran, and task
quality when measured (rows and speedups: ``specdec.bench.rows``; Markdown:
``specdec.bench.markdown``).

Speedup = ``wall_s`` of the baseline run (``ar``) / ``wall_s`` of the method run, on one dataset,
computed only when both runs share the model pair, the prompts, the sampling, the machine and the
software versions; otherwise the cell says ``refused`` and the report lists why.

A run whose ``summary.json`` is not ``complete`` (stopped before its last dataset) shows ``no`` in
the ``complete`` column and is listed with what it left unfinished; ``--strict`` exits with status
2 for it too, and for a temperature-0 run whose outputs differ from ``ar``'s
(``specdec.bench.greedy``).

Also: per-category tables for datasets with categories (``specdec.bench.categories``), repeats over
seeds merged into mean ± std (``specdec.bench.repeats``), ``leaderboard.csv`` beside the Markdown
(``specdec.bench.board_csv``), and with ``--wandb`` the output folder as a W&B artifact
(``specdec.bench.wandb_artifacts``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from specdec.bench.board_csv import write_csv
from specdec.bench.markdown import to_markdown
from specdec.bench.rows import Row, build_rows, modeled_speedup
from specdec.bench.runs import Run, load_runs, mismatches

__all__ = ["Row", "Run", "build_rows", "load_runs", "main", "mismatches", "modeled_speedup",
           "report", "to_markdown"]


def report(paths: list[str | Path], out_dir: str | Path, *, baseline: str = "ar",
           plots: bool = True) -> tuple[str, list[Row]]:
    """Write ``leaderboard.md``, ``leaderboard.csv`` (and PNG plots) into ``out_dir``; returns the
    Markdown and rows."""
    rows = build_rows(load_runs(paths), baseline=baseline)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = to_markdown(rows)
    (out_dir / "leaderboard.md").write_text(text)
    write_csv(rows, out_dir / "leaderboard.csv")
    if plots:
        from specdec.bench.plots import plot_all

        plot_all(rows, out_dir)
    return text, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specdec.report", description=__doc__)
    parser.add_argument("runs", nargs="+", help="run directories (or folders holding them)")
    parser.add_argument("--out", default="outputs/report",
                        help="output folder (default outputs/report)")
    parser.add_argument("--baseline", default="ar", help="method name of the baseline run")
    parser.add_argument("--no-plots", action="store_true", help="write the Markdown only")
    parser.add_argument("--wandb", action="store_true",
                        help="also log the output folder as a W&B artifact (offline unless "
                             "WANDB_MODE says otherwise)")
    parser.add_argument("--wandb-project", default="specdec", help="W&B project (--wandb)")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 2 when any speedup was refused, any run is "
                             "incomplete or any greedy output differs from the baseline's")
    args = parser.parse_args(argv)
    try:
        text, rows = report(args.runs, args.out, baseline=args.baseline,
                            plots=not args.no_plots)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(text)
    for r in rows:
        if r.refused:
            print(f"refused: {r.label} on {r.dataset}: {r.refused}", file=sys.stderr)
    incomplete = {run.path: run.incomplete for r in rows for run in r.runs if run.incomplete}
    for path, why in incomplete.items():
        print(f"incomplete: {path}: {why}", file=sys.stderr)
    differ = [r for r in rows if r.greedy is not None and r.greedy.equal < r.greedy.prompts]
    for r in differ:
        print(f"greedy mismatch: {r.label} on {r.dataset}: {len(r.greedy.mismatched)} of "
              f"{r.greedy.prompts} prompts differ from {r.greedy.baseline}", file=sys.stderr)
    print(f"wrote {Path(args.out) / 'leaderboard.md'} and leaderboard.csv", file=sys.stderr)
    if args.wandb:
        from specdec.bench.wandb_artifacts import WandbReport, common_group

        group = common_group([run.summary for r in rows for run in r.runs])
        name = WandbReport(project=args.wandb_project,
                           mode=os.environ.get("WANDB_MODE", "offline")).log(args.out, group=group)
        print(f"logged {args.out} as W&B artifact {name}", file=sys.stderr)
    return 2 if args.strict and (incomplete or differ or any(r.refused for r in rows)) else 0


if __name__ == "__main__":
    sys.exit(main())
