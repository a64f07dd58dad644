"""``python -m specdec.report --format specbench RUN_DIRS``: Spec-Bench answers and speed table.

Writes, into the output folder, one Spec-Bench answer file per run (``<model_id>.jsonl``, format
and field meanings in ``specdec.bench.report.specbench_answers``) and Spec-Bench's speed report as
``speed.md`` and ``speed.csv``: per run, per category (the report's, ``category_of``) and
``overall``, the questions, mean accepted tokens, tokens/s, the baseline's tokens/s over the same
questions and the speedup, computed from the answer rows as Spec-Bench's ``evaluation/speed.py``
(repository ``hemingkx/Spec-Bench``) computes them:

* mean accepted tokens = mean of every ``accept_lengths`` entry (= Σ new tokens / Σ steps = τ);
* tokens/s = mean over questions of Σ ``new_tokens`` / Σ ``wall_time`` (prefill included);
* speedup = method tokens/s / baseline tokens/s.

The baseline is the first run of the ``--baseline`` method (``ar``) that compares with the run on
every one of its datasets (``specdec.bench.report.runs.mismatches``, target only) and answered every
question the run answered; a baseline run is its own (speedup 1). Otherwise the speedup is left
empty and the table says why. Unreadable summaries are named and skipped, copies of a run count
once, as in the leaderboard (``specdec.bench.report.board``).
"""

from __future__ import annotations

import csv
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

from specdec.bench.report.repeats import usable_runs
from specdec.bench.report.runs import Run, mismatches
from specdec.bench.report.specbench_answers import OVERALL, Entry, choice_of, entries, model_id
from specdec.bench.report.specbench_answers import write_answers as write_answers

__all__ = ["Export", "SpeedRow", "choice_of", "export", "model_ids", "speed_table",
           "write_answers"]

log = logging.getLogger(__name__)
COLUMNS = ("model_id", "category", "questions", "mean_accepted_tokens", "tokens_per_s",
           "baseline_tokens_per_s", "speedup")


@dataclass
class SpeedRow:
    """One line of the speed table: a run on one category (or ``overall``)."""

    model_id: str
    category: str
    questions: int
    mean_accepted_tokens: float
    tokens_per_s: float
    baseline_tokens_per_s: float | None = None
    speedup: float | None = None


@dataclass
class Export:
    """What ``export`` wrote: the Markdown, speed rows, answer files and what it left out."""

    text: str
    rows: list[SpeedRow]
    files: list[Path]
    refused: dict[str, str] = field(default_factory=dict)  # model_id: why no speedup
    unreadable: list[str] = field(default_factory=list)
    copies: list[str] = field(default_factory=list)


def model_ids(runs: list[Run]) -> list[str]:
    """``model_id`` of each run; where two share one, the run folder's name is appended (and a
    number, where that repeats too)."""
    plain = [model_id(r) for r in runs]
    out: list[str] = []
    for run, mid in zip(runs, plain):
        name = mid if plain.count(mid) == 1 else f"{mid}-{run.path.name}"
        k, unique = 2, name
        while unique in out:
            unique, k = f"{name}-{k}", k + 1
        out.append(unique)
    return out


def _tokens_per_s(rows: list[dict]) -> float:
    """Spec-Bench's tokens/s: mean over questions of Σ new tokens / Σ wall time."""
    speeds = [sum(c["new_tokens"]) / sum(c["wall_time"]) if sum(c["wall_time"]) else math.nan
              for c in (r["choices"][0] for r in rows)]
    return sum(speeds) / len(speeds) if speeds else math.nan


def _accepted(rows: list[dict]) -> float:
    lengths = [n for r in rows for n in r["choices"][0]["accept_lengths"]]
    return sum(lengths) / len(lengths) if lengths else math.nan


def _baseline(run: Run, runs: list[Run], method: str) -> tuple[Run | None, str | None]:
    """The run's baseline run, or None and why there is none."""
    if run.method == method:
        return run, None
    datasets = list(run.summary.datasets)
    candidates = [b for b in runs if b.method == method
                  and all(d in b.summary.datasets for d in datasets)]
    if not candidates:
        return None, f"no `{method}` run of {', '.join(datasets)} among the inputs"
    reasons = {b.path: [m for d in datasets for m in mismatches(run, b, d, target_only=True)]
               for b in candidates}
    match = next((b for b in candidates if not reasons[b.path]), None)
    if match is None:
        first = candidates[0]
        return None, f"`{method}` run {first.path} refused: " + "; ".join(reasons[first.path])
    return match, None


def _groups(own: list[Entry]) -> dict[str, list[Entry]]:
    by_cat: dict[str, list[Entry]] = {}
    for e in own:
        by_cat.setdefault(e.category, []).append(e)
    return {**dict(sorted(by_cat.items())), OVERALL: own}


def _rows_of(mid: str, own: list[Entry], base: list[Entry] | None) -> list[SpeedRow]:
    theirs = {(e.dataset, e.row["question_id"]): e.row for e in base or []}
    out = []
    for cat, group in _groups(own).items():
        rows = [e.row for e in group]
        line = SpeedRow(mid, cat, len(rows), _accepted(rows), _tokens_per_s(rows))
        if base is not None:
            line.baseline_tokens_per_s = _tokens_per_s(
                [theirs[(e.dataset, e.row["question_id"])] for e in group])
            line.speedup = (line.tokens_per_s / line.baseline_tokens_per_s
                            if line.baseline_tokens_per_s else math.nan)
        out.append(line)
    return out


def speed_table(runs: list[Run], baseline: str = "ar") -> tuple[list[SpeedRow], dict[str, str]]:
    """Speed rows of every run (categories then ``overall``), and per model id why its speedup
    is missing."""
    mids = model_ids(runs)
    answers = {run.path: entries(run, mid) for run, mid in zip(runs, mids)}
    rows: list[SpeedRow] = []
    refused: dict[str, str] = {}
    for run, mid in zip(runs, mids):
        base_run, why = _baseline(run, runs, baseline)
        base = answers[base_run.path] if base_run is not None else None
        if base is not None:
            have = {(e.dataset, e.row["question_id"]) for e in base}
            missing = [e.row["question_id"] for e in answers[run.path]
                       if (e.dataset, e.row["question_id"]) not in have]
            if missing:
                base, why = None, (f"`{baseline}` run {base_run.path} lacks questions "
                                   + ", ".join(map(str, missing[:5])))
        if why:
            refused[mid] = why
        rows += _rows_of(mid, answers[run.path], base)
    return rows, refused


def _fmt(x: float | int | str | None) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return "nan" if math.isnan(x) else f"{x:.3f}"
    return str(x)


def to_markdown(rows: list[SpeedRow], refused: dict[str, str], skipped: list[str],
                copies: list[str]) -> str:
    """The speed table as Markdown, with the notes on what was refused or left out."""
    head = ["model_id", "category", "questions", "#mean accepted tokens", "tokens/s",
            "baseline tokens/s", "speedup"]
    lines = ["# Spec-Bench speed", "",
             "Spec-Bench's evaluation/speed.py on these answer files: mean accepted tokens = "
             "Σ accept_lengths / steps (τ); tokens/s = mean over questions of Σ new_tokens / "
             "Σ wall_time (prefill included); speedup = tokens/s / the baseline's.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_fmt(getattr(r, c)) for c in COLUMNS) + " |" for r in rows]
    notes = ([f"- no speedup for {mid}: {why}" for mid, why in refused.items()]
             + [f"- skipped (unreadable): {s}" for s in skipped]
             + [f"- counted once: {c}" for c in copies])
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def write_csv(rows: list[SpeedRow], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for r in rows:
            writer.writerow(["" if getattr(r, c) is None else getattr(r, c) for c in COLUMNS])


def export(paths: list[str | Path], out_dir: str | Path, *, baseline: str = "ar",
           warn: bool = True) -> Export:
    """Write every run's answer file, ``speed.md`` and ``speed.csv`` into ``out_dir``."""
    runs, unreadable, copies = usable_runs(paths, warn=warn)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = [write_answers(run, out_dir, mid) for run, mid in zip(runs, model_ids(runs))]
    rows, refused = speed_table(runs, baseline)
    text = to_markdown(rows, refused, unreadable, copies)
    (out_dir / "speed.md").write_text(text, encoding="utf-8")
    write_csv(rows, out_dir / "speed.csv")
    return Export(text, rows, files, refused, unreadable, copies)
