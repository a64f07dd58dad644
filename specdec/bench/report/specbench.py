"""``python -m specdec.report --format specbench RUN_DIRS``: Spec-Bench answers and speed table.

Writes, into the output folder, one Spec-Bench answer file per run (``<model_id>.jsonl``, format
and field meanings in ``specdec.bench.report.specbench_answers``), Spec-Bench's speed report as
``speed.md`` and ``speed.csv`` (per run, per speed.py task and ``overall``: the questions, mean
accepted tokens, tokens/s, the baseline's tokens/s and the speedup, computed from the answer rows
exactly as Spec-Bench's ``evaluation/speed.py`` computes them,
``specdec.bench.report.specbench_speed``) and each baseline's tokenizer as ``tokenizer-<pair>/``,
the folder to give speed.py as ``--tokenizer-path``: on these files speed.py prints the table's
numbers.

One difference stays by construction: speed.py counts the baseline's tokens by re-tokenising its
answer text (``specdec.bench.report.specbench_tokens``), not its generated ids, so the baseline's
tokens/s (and every speedup) is Spec-Bench's number, not the leaderboard's; where the baseline's
tokenizer cannot be loaded offline the table counts generated ids and its notes say so (speed.py
would then differ). Prefill is inside ``wall_time`` here, outside the leaderboard's timings.

The runs are checked against their records first (``specdec.bench.report.audit``): a run the
records do not complete (stopped early, records deleted) is left out and named, as are record files
ending in a cut-off line and summaries that disagree with their records; ``--strict`` exits 2 on
any of them. Unreadable summaries are named and skipped and copies of a run count once, as in the
leaderboard (``specdec.bench.report.board``).
"""

from __future__ import annotations

import csv
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from specdec.bench.report.out_dir import out_folder
from specdec.bench.report.repeats import usable_runs
from specdec.bench.report.runs import doubts
from specdec.bench.report.specbench_answers import choice_of as choice_of
from specdec.bench.report.specbench_answers import write_answers as write_answers
from specdec.bench.report.specbench_speed import SpeedRow, SpeedTable, model_ids, speed_table
from specdec.errors import BadInput

__all__ = ["Export", "SpeedRow", "choice_of", "export", "model_ids", "speed_table", "write_answers"]

log = logging.getLogger(__name__)
COLUMNS = (
    "model_id",
    "category",
    "questions",
    "mean_accepted_tokens",
    "tokens_per_s",
    "baseline_tokens_per_s",
    "speedup",
)


@dataclass
class Export:
    """What ``export`` wrote: the Markdown, speed rows, answer files and what it left out."""

    text: str
    rows: list[SpeedRow]
    files: list[Path]
    refused: dict[str, str] = field(default_factory=dict)  # model_id: why no speedup
    unreadable: list[str] = field(default_factory=list)
    copies: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # "<run>: why" (not complete)
    doubts: list[str] = field(default_factory=list)  # summaries vs records, cut-off lines
    notes: list[str] = field(default_factory=list)  # each baseline and its token count


def _fmt(x: float | int | str | None) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return "nan" if math.isnan(x) else f"{x:.3f}"
    return str(x)


def to_markdown(
    rows: list[SpeedRow],
    refused: dict[str, str],
    skipped: list[str],
    copies: list[str],
    *,
    left_out: list[str] = (),
    doubtful: list[str] = (),
    notes: list[str] = (),
) -> str:
    """The speed table as Markdown, with the notes on what was refused or left out."""
    head = [
        "model_id",
        "category",
        "questions",
        "#mean accepted tokens",
        "tokens/s",
        "baseline tokens/s",
        "speedup",
    ]
    lines = [
        "# Spec-Bench speed",
        "",
        "Spec-Bench's evaluation/speed.py on these answer files: mean accepted tokens = "
        "Σ accept_lengths / steps (τ); tokens/s = mean over questions of Σ new_tokens / "
        "Σ wall_time (prefill included); baseline tokens/s = the same over the baseline's "
        "questions of the task, its tokens re-tokenised from its answer text as speed.py "
        "counts them (len(tokenizer(turn).input_ids) - 1 per turn, not the generated ids); "
        "speedup = tokens/s / baseline tokens/s. Check: python evaluation/speed.py "
        "--file-path <model_id>.jsonl --base-path <baseline>.jsonl --tokenizer-path "
        "<its tokenizer folder, below>.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join(_fmt(getattr(r, c)) for c in COLUMNS) + " |" for r in rows]
    notes = (
        [f"- {n}" for n in notes]
        + [f"- no speedup for {mid}: {why}" for mid, why in refused.items()]
        + [f"- ✗ left out (not complete): {x}" for x in left_out]
        + [f"- ✗ summary vs records: {x}" for x in doubtful]
        + [f"- skipped (unreadable): {s}" for s in skipped]
        + [f"- counted once: {c}" for c in copies]
    )
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def write_csv(rows: list[SpeedRow], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow(["" if getattr(r, c) is None else getattr(r, c) for c in COLUMNS])


def _notes(table: SpeedTable, out_dir: Path) -> list[str]:
    """Per run its baseline and how the baseline's tokens were counted; each loaded tokenizer is
    saved as ``tokenizer-<pair>/`` in ``out_dir`` (once)."""
    saved: dict[int, str] = {}
    notes = []
    for mid, (base_mid, counter) in table.baselines.items():
        if counter.tokenizer is None:
            notes.append(
                f"baseline of {mid}: {base_mid}, its tokens counted as generated ids: "
                f"{counter.why_not}; speed.py re-tokenises the text and may differ"
            )
            continue
        if id(counter) not in saved:
            name = "tokenizer-" + re.sub(r"[^A-Za-z0-9._+-]+", "_", counter.pair)
            counter.save(out_dir / name)
            saved[id(counter)] = name
        notes.append(
            f"baseline of {mid}: {base_mid}, its tokens re-tokenised with "
            f"{counter.name} (--tokenizer-path {saved[id(counter)]})"
        )
    return notes


def export(
    paths: list[str | Path], out_dir: str | Path, *, baseline: str = "ar", warn: bool = True
) -> Export:
    """Write every complete run's answer file, ``speed.md``, ``speed.csv`` and the baselines'
    tokenizers into ``out_dir``.

    Raises:
        BadInput: no run among the inputs is complete, or ``out_dir`` is not a folder.
    """
    runs, unreadable, copies = usable_runs(paths, warn=warn)
    doubtful = doubts(runs)
    left_out = [f"{run.path}: {run.incomplete}" for run in runs if run.incomplete]
    for line in (doubtful + left_out) if warn else []:
        log.warning("%s", line)
    runs = [run for run in runs if not run.incomplete]
    if not runs:
        raise BadInput(
            "no complete run among the inputs (Spec-Bench's numbers need every "
            "question answered): " + "; ".join(left_out) + "; rerun their eval "
            "commands (they resume)"
        )
    out_dir = out_folder(out_dir)
    files = [write_answers(run, out_dir, mid) for run, mid in zip(runs, model_ids(runs))]
    table = speed_table(runs, baseline)
    notes = _notes(table, out_dir)
    text = to_markdown(
        table.rows,
        table.refused,
        unreadable,
        copies,
        left_out=left_out,
        doubtful=doubtful,
        notes=notes,
    )
    (out_dir / "speed.md").write_text(text, encoding="utf-8")
    write_csv(table.rows, out_dir / "speed.csv")
    return Export(
        text, table.rows, files, table.refused, unreadable, copies, left_out, doubtful, notes
    )
