"""``python -m specdec.report RUN_DIRS...``: merge eval runs into a Markdown leaderboard and plots.

Each run directory holds a ``summary.json`` written by ``specdec.eval`` (a folder given here is
searched recursively; ``specdec.bench.report.runs``). The leaderboard has one row per (method run,
dataset) with tokens/s, speedup, block efficiency, acceptance, rollback, discard and verification
rates (definitions in ``specdec.metrics``), ``modeled_s / wall_s`` when a cost model ran, and task
quality when measured (rows and speedups: ``specdec.bench.report.rows``; Markdown:
``specdec.bench.report.markdown``).

Speedup = ``wall_s`` of the baseline run (``ar``) / ``wall_s`` of the method run, on one dataset,
computed only when both runs share the model pair, the prompts, the sampling, the machine and the
software versions; otherwise the cell says ``refused`` and the report lists why.

A ``summary.json`` that cannot be read (not JSON, no ``datasets``) is named and skipped with a
warning (``--strict``: status 2); a folder given twice, or a copy of a run (same configuration
and seed), counts once (``specdec.bench.report.repeats.drop_copies``), with a note.

Counts, completeness and the greedy check come from the records, not from what ``summary.json``
says (``specdec.bench.report.audit``): a dataset's ``prompts`` is its number of records, and a run
is complete only when its summary says so and its records hold every prompt of every dataset. A
summary that disagrees with its records, and a record file ending in a cut-off line, is named on
stderr and in a Markdown section. Among copies of one run the complete one with the most prompts
is kept, and the choice is printed.

A run that is not complete (stopped before its last dataset, or its records say so) shows ``no``
in the ``complete`` column and is listed with what it left unfinished; ``--strict`` exits with
status 2 for it too, for a summary that disagrees with its records, a cut-off record line, and a
temperature-0 run whose outputs differ from ``ar``'s (``specdec.bench.report.greedy``).

Also: per-category tables for datasets with categories (``specdec.bench.report.categories``),
repeats over seeds merged into mean ± std (``specdec.bench.report.repeats``), ``leaderboard.csv``
and ``leaderboard.tex`` beside the Markdown (``specdec.bench.report.board_csv``,
``specdec.bench.report.latex``), the plots as PDF and 300-dpi PNG with error bars from repeats
(``specdec.bench.report.plots``), and with ``--wandb`` the output folder as a W&B artifact, the
leaderboard as a W&B Table and the plots as images (``specdec.bench.wandb_artifacts``).

``--format specbench`` writes Spec-Bench's answer files and speed table instead
(``specdec.bench.report.specbench``); the default format is the leaderboard above.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from specdec.bench.report.board_csv import write_csv
from specdec.bench.report.latex import write_latex
from specdec.bench.report.markdown import to_markdown
from specdec.bench.report.out_dir import check_out_folder, out_folder
from specdec.bench.report.repeats import usable_runs
from specdec.bench.report.row import Row
from specdec.bench.report.rows import build_rows, paired_modeled_speedup
from specdec.bench.report.runs import Run, doubts, load_runs, mismatches
from specdec.errors import EXIT_STATUS, BadInput, InputError

__all__ = [
    "Board",
    "Row",
    "Run",
    "board",
    "build_rows",
    "load_runs",
    "main",
    "mismatches",
    "paired_modeled_speedup",
    "report",
    "to_markdown",
]

log = logging.getLogger(__name__)


@dataclass
class Board:
    """A written leaderboard: its Markdown, rows, and the inputs it left out."""

    text: str
    rows: list[Row]
    unreadable: list[str] = field(default_factory=list)  # "<file>: why" (skipped)
    copies: list[str] = field(default_factory=list)  # "<folder>: why" (counted once)
    doubts: list[str] = field(default_factory=list)  # summaries their records contradict


def board(
    paths: list[str | Path],
    out_dir: str | Path,
    *,
    baseline: str = "ar",
    plots: bool = True,
    warn: bool = True,
) -> Board:
    """Write ``leaderboard.md``, ``leaderboard.csv``, ``leaderboard.tex`` (and the plots, PDF and
    PNG) into ``out_dir``; unreadable
    summaries and copies of a run are left out, and summaries their records contradict are named,
    each with a logged warning (``warn``) and a line in the Markdown.

    Raises:
        BadInput: ``out_dir`` is not a folder that can be made.
    """
    runs, unreadable, copies = usable_runs(paths, warn=warn)
    out_dir = out_folder(out_dir)
    doubtful = doubts(runs)
    for line in doubtful if warn else []:
        log.warning("summary vs records: %s", line)
    rows = build_rows(runs, baseline=baseline)
    text = to_markdown(rows, skipped=unreadable, copies=copies, doubts=doubtful)
    (out_dir / "leaderboard.md").write_text(text)
    write_csv(rows, out_dir / "leaderboard.csv")
    write_latex(rows, out_dir / "leaderboard.tex")
    if plots:
        from specdec.bench.report.plots import plot_all

        plot_all(rows, out_dir)
    return Board(text, rows, unreadable, copies, doubtful)


def report(
    paths: list[str | Path], out_dir: str | Path, *, baseline: str = "ar", plots: bool = True
) -> tuple[str, list[Row]]:
    """``board`` as (Markdown, rows)."""
    written = board(paths, out_dir, baseline=baseline, plots=plots)
    return written.text, written.rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specdec.report", description=__doc__)
    parser.add_argument("runs", nargs="+", help="run directories (or folders holding them)")
    parser.add_argument(
        "--out", default="outputs/report", help="output folder (default outputs/report)"
    )
    parser.add_argument("--baseline", default="ar", help="method name of the baseline run")
    parser.add_argument("--no-plots", action="store_true", help="write the Markdown only")
    parser.add_argument(
        "--wandb",
        action="store_true",
        help="also log the output folder as a W&B artifact (offline unless "
        "WANDB_MODE says otherwise)",
    )
    parser.add_argument("--wandb-project", default="specdec", help="W&B project (--wandb)")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit with status 2 when any speedup was refused, any run is "
        "incomplete, any summary was unreadable or disagrees with its "
        "records, a record line is cut off, or any greedy output "
        "differs from the baseline's",
    )
    parser.add_argument(
        "--format",
        choices=("leaderboard", "specbench"),
        default="leaderboard",
        help="leaderboard (default) or specbench: Spec-Bench answer files "
        "(<model_id>.jsonl) and its speed table (speed.md, speed.csv); "
        "--no-plots and --wandb apply to the leaderboard only",
    )
    args = parser.parse_args(argv)
    try:
        check_out_folder(args.out)
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_STATUS
    if args.format == "specbench":
        return _specbench(args)
    try:
        written = board(
            args.runs, args.out, baseline=args.baseline, plots=not args.no_plots, warn=False
        )  # said below, on stderr
    except (ValueError, InputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    text, rows = written.text, written.rows
    print(text)
    for line in written.unreadable:
        print(f"skipped (unreadable): {line}", file=sys.stderr)
    for line in written.copies:
        print(f"counted once: {line}", file=sys.stderr)
    for line in written.doubts:
        print(f"summary vs records: {line}", file=sys.stderr)
    for r in rows:
        if r.refused:
            print(f"refused: {r.label} on {r.dataset}: {r.refused}", file=sys.stderr)
    incomplete = {run.path: run.incomplete for r in rows for run in r.runs if run.incomplete}
    for path, why in incomplete.items():
        print(f"incomplete: {path}: {why}", file=sys.stderr)
    differ = [r for r in rows if r.greedy is not None and r.greedy.equal < r.greedy.prompts]
    for r in differ:
        print(
            f"greedy mismatch: {r.label} on {r.dataset}: {len(r.greedy.mismatched)} of "
            f"{r.greedy.prompts} prompts differ from {r.greedy.baseline}",
            file=sys.stderr,
        )
    print(
        f"wrote {Path(args.out) / 'leaderboard.md'}, leaderboard.csv and leaderboard.tex",
        file=sys.stderr,
    )
    if args.wandb:
        from specdec.bench.wandb_artifacts import WandbReport, common_group

        group = common_group([run.summary for r in rows for run in r.runs])
        name = WandbReport(
            project=args.wandb_project, mode=os.environ.get("WANDB_MODE", "offline")
        ).log(args.out, group=group)
        print(f"logged {args.out} as W&B artifact {name}", file=sys.stderr)
    bad = (
        incomplete or differ or written.unreadable or written.doubts or any(r.refused for r in rows)
    )
    return 2 if args.strict and bad else 0


def _specbench(args: argparse.Namespace) -> int:
    """``--format specbench``: answer files and speed table; warnings and refusals on stderr."""
    from specdec.bench.report.specbench import export

    try:
        done = export(args.runs, args.out, baseline=args.baseline, warn=False)  # said below
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_STATUS
    print(done.text)
    for line in done.unreadable:
        print(f"skipped (unreadable): {line}", file=sys.stderr)
    for line in done.copies:
        print(f"counted once: {line}", file=sys.stderr)
    for line in done.left_out:
        print(f"left out (not complete): {line}", file=sys.stderr)
    for line in done.doubts:
        print(f"summary vs records: {line}", file=sys.stderr)
    for mid, why in done.refused.items():
        print(f"no speedup: {mid}: {why}", file=sys.stderr)
    print(
        f"wrote {len(done.files)} answer files, speed.md and speed.csv in {args.out}",
        file=sys.stderr,
    )
    bad = done.unreadable or done.refused or done.left_out or done.doubts
    return 2 if args.strict and bad else 0


if __name__ == "__main__":
    sys.exit(main())
