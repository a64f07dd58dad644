"""Spec-Bench's speed table from our answer rows, computed as its ``evaluation/speed.py`` does.

Spec-Bench (Xia et al. 2024, arXiv:2401.07851; repository ``hemingkx/Spec-Bench``) reads one
method answer file and one baseline answer file and, per task (``mt_bench``: MT-bench's eight
categories; ``translation``, ``summarization``, ``qa``, ``math_reasoning``, ``rag``: that
category; ``overall``: every row), selects the rows of *each file* of that task and reports:

* mean accepted tokens = the mean of every ``accept_lengths`` entry of the method's rows;
* tokens/s = the mean over the method's rows of Σ ``new_tokens`` / Σ ``wall_time``;
* baseline tokens/s = the mean over the baseline's rows of Σ re-tokenised turn tokens /
  Σ ``wall_time`` (``specdec.bench.report.specbench_tokens``: not ``new_tokens``);
* speedup = tokens/s / baseline tokens/s.

Here each run is a method file; its baseline is the first run of the ``--baseline`` method (``ar``)
that compares with it on every dataset (``specdec.bench.report.runs.mismatches``, target only) and
answered exactly the run's questions, since speed.py averages the baseline's whole file of each
task (a baseline run with more or fewer questions would average others). A baseline run is its own
baseline, as ``speed.py ar.jsonl ar.jsonl`` is: its speedup is then its generated-token count over
its re-tokenised count, 1 only where re-tokenising gives back the generated ids. Without a
baseline the speedup is left empty and ``refused`` says why. Tasks are listed in sorted order, then
``overall``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specdec.bench.report.runs import Run, mismatches
from specdec.bench.report.specbench_answers import OVERALL, Entry, entries, model_id
from specdec.bench.report.specbench_tokens import Retokenizer, retokenizer


@dataclass
class SpeedRow:
    """One line of the speed table: a run on one task (or ``overall``)."""

    model_id: str
    category: str
    questions: int
    mean_accepted_tokens: float
    tokens_per_s: float
    baseline_tokens_per_s: float | None = None
    speedup: float | None = None


@dataclass
class SpeedTable:
    """The speed rows, per model id why its speedup is missing, and per model id its baseline:
    the baseline's model id and its ``Retokenizer``."""

    rows: list[SpeedRow]
    refused: dict[str, str]
    baselines: dict[str, tuple[str, Retokenizer]]


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


def _speed(rows: list[dict], tokens) -> float:
    """Mean over rows of tokens(choice) / Σ wall time."""
    speeds = [
        tokens(c) / sum(c["wall_time"]) if sum(c["wall_time"]) else math.nan
        for c in (r["choices"][0] for r in rows)
    ]
    return sum(speeds) / len(speeds) if speeds else math.nan


def _generated(choice: dict) -> int:
    return sum(int(n) for n in choice["new_tokens"])


def _accepted(rows: list[dict]) -> float:
    lengths = [n for r in rows for n in r["choices"][0]["accept_lengths"]]
    return sum(lengths) / len(lengths) if lengths else math.nan


def _baseline(run: Run, runs: list[Run], method: str) -> tuple[Run | None, str | None]:
    """The run's baseline run, or None and why there is none."""
    if run.method == method:
        return run, None
    datasets = list(run.summary.datasets)
    candidates = [
        b for b in runs if b.method == method and all(d in b.summary.datasets for d in datasets)
    ]
    if not candidates:
        return None, f"no `{method}` run of {', '.join(datasets)} among the inputs"
    reasons = {
        b.path: [m for d in datasets for m in mismatches(run, b, d, target_only=True)]
        for b in candidates
    }
    match = next((b for b in candidates if not reasons[b.path]), None)
    if match is None:
        first = candidates[0]
        return None, f"`{method}` run {first.path} refused: " + "; ".join(reasons[first.path])
    return match, None


def _same_questions(own: list[Entry], base: list[Entry], base_run: Run, method: str) -> str | None:
    """Why the baseline's answers are not the run's questions (None: they are)."""
    mine = {(e.dataset, e.row["question_id"]) for e in own}
    theirs = {(e.dataset, e.row["question_id"]) for e in base}
    lacks = [q for _, q in sorted(mine - theirs, key=str)]
    extra = [q for _, q in sorted(theirs - mine, key=str)]
    if lacks:
        return f"`{method}` run {base_run.path} lacks questions " + ", ".join(map(str, lacks[:5]))
    if extra:
        return (
            f"`{method}` run {base_run.path} answered questions the run did not ("
            + ", ".join(map(str, extra[:5]))
            + "): speed.py would average them too"
        )
    return None


def _groups(own: list[Entry]) -> dict[str, list[Entry]]:
    by_task: dict[str, list[Entry]] = {}
    for e in own:
        by_task.setdefault(e.category, []).append(e)
    return {**dict(sorted(by_task.items())), OVERALL: own}


def _rows_of(
    mid: str, own: list[Entry], base: list[Entry] | None, counter: Retokenizer | None
) -> list[SpeedRow]:
    out = []
    for task, group in _groups(own).items():
        rows = [e.row for e in group]
        line = SpeedRow(mid, task, len(rows), _accepted(rows), _speed(rows, _generated))
        if base is not None and counter is not None:
            # speed.py: every baseline row of the task, its tokens re-tokenised from its text
            theirs = [e.row for e in base if task == OVERALL or e.category == task]
            line.baseline_tokens_per_s = _speed(theirs, counter.tokens)
            line.speedup = (
                line.tokens_per_s / line.baseline_tokens_per_s
                if line.baseline_tokens_per_s
                else math.nan
            )
        out.append(line)
    return out


def speed_table(runs: list[Run], baseline: str = "ar") -> SpeedTable:
    """Speed rows of every run (tasks then ``overall``), why a speedup is missing, and each
    run's baseline (see the module docstring)."""
    mids = model_ids(runs)
    answers = {run.path: entries(run, mid) for run, mid in zip(runs, mids)}
    mid_of = {run.path: mid for run, mid in zip(runs, mids)}
    counters: dict[Path, Retokenizer] = {}
    table = SpeedTable([], {}, {})
    for run, mid in zip(runs, mids):
        # 1. The baseline run, and its answers when they are the run's questions.
        base_run, why = _baseline(run, runs, baseline)
        base = answers[base_run.path] if base_run is not None else None
        if base_run is not None and base is not None:
            why = _same_questions(answers[run.path], base, base_run, baseline)
            base = None if why else base
        # 2. The baseline's tokenizer (loaded once per baseline run) and the rows.
        counter = None
        if base_run is not None and base is not None:
            counter = counters.setdefault(base_run.path, retokenizer(base_run))
            table.baselines[mid] = (mid_of[base_run.path], counter)
        if why:
            table.refused[mid] = why
        table.rows += _rows_of(mid, answers[run.path], base, counter)
    return table
