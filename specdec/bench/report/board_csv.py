"""``leaderboard.csv``: the leaderboard as one table, one row per (method row, dataset).

Written by ``specdec.bench.report.board`` beside ``leaderboard.md``; ``pandas.read_csv`` reads it as
it is (a header line, comma-separated, empty cells for undefined values, which pandas reads as NaN).
Columns, in order:

* ``method``: the row's label (``sps``, or ``sps (<folder>)`` when a method has several rows on
  one dataset); ``method_name``: the preset; ``dataset``;
* ``pair``: the model pair's name; ``benchmark``: the run's datasets joined by ``+`` (as its W&B
  group, ``specdec.bench.wandb_artifacts.RunTag``); ``git_commit``, ``git_dirty``: the code that
  made the (first) run (``provenance`` in its summary);
* ``runs``: runs merged into the row (repeats over seeds, ``specdec.bench.report.repeats``);
  ``seeds``: their seeds, ``;``-separated; ``run_dirs``: their folders, ``;``-separated, relative
  to the CSV's own folder (the board and its runs move together);
* ``lossless``, ``complete``: ``True`` / ``False`` (complete: every run of the row finished);
* ``temperature``; ``prompts``;
* for each of ``METRICS``: the value (the mean for merged rows) and ``<metric>_std``, the sample
  standard deviation over the runs (empty for a single run): tokens/s, the wall-clock
  ``speedup`` and ``modeled_speedup_vs_ar`` against the baseline run
  (``specdec.bench.report.rows``), ``self_modeled_speedup`` (the run's own estimate against
  AR-equivalent forwards, without an ``ar`` run, ``specdec.bench.run.summary``; another number), τ
  (``block_efficiency``), acceptance, rollback, discard and verification rates, the hit rate
  of methods that draft ahead and SpecBranch's branches per step (``specdec.metrics``; empty
  for the others), ``wall_s``,
  ``modeled_s``;
* ``modeled_over_wall``: ``modeled_s / wall_s``;
* ``greedy_equal``: share of prompts whose temperature-0 output equals the baseline's
  (``specdec.bench.report.greedy``; empty: not compared), ``greedy_prompts``: prompts compared;
* ``baseline_dir``: the baseline run paired with the row (relative, as ``run_dirs``);
  ``refused``: why a speedup was refused;
* ``timing`` (``ok`` / ``unreliable``; empty: not checked) and ``timing_reasons`` (``;``
  between them), once any row's run had its timing checked (``specdec.bench.timing``): an
  unreliable row's ``speedup``, ``modeled_speedup_vs_ar`` and ``self_modeled_speedup`` (and their
  ``_std``) are empty unless ``SPECDEC_TIMING=lenient``;
* ``quality_<name>`` and ``quality_<name>_std`` for each quality check measured.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

from specdec.bench.report.row import Row
from specdec.bench.wandb_artifacts import RunTag

METRICS = (
    "tokens_per_s",
    "speedup",
    "modeled_speedup_vs_ar",
    "self_modeled_speedup",
    "block_efficiency",
    "acceptance_rate",
    "rollback_rate",
    "discard_rate",
    "verification_rate",
    "hit_rate",
    "branches_per_step",
    "wall_s",
    "modeled_s",
)


def _cell(value: object) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def columns(rows: list[Row]) -> list[str]:
    """The header: the fixed columns, then the quality columns the rows have."""
    quality = sorted({k for r in rows for k in r.metrics if k.startswith("quality_")})
    return [
        "method",
        "method_name",
        "dataset",
        "pair",
        "benchmark",
        "git_commit",
        "git_dirty",
        "runs",
        "seeds",
        "run_dirs",
        "lossless",
        "complete",
        "temperature",
        "prompts",
        *[c for m in METRICS for c in (m, f"{m}_std")],
        "modeled_over_wall",
        "greedy_equal",
        "greedy_prompts",
        "baseline_dir",
        "refused",
        *(["timing", "timing_reasons"] if any(r.checked for r in rows) else []),
        *[c for q in quality for c in (q, f"{q}_std")],
    ]


def _rel(path: Path, root: Path | None) -> str:
    """``path`` relative to ``root`` (as given when there is no root or no relative path)."""
    if root is None:
        return str(path)
    try:
        return os.path.relpath(Path(path).resolve(), Path(root).resolve())
    except ValueError:  # another drive (Windows)
        return str(path)


def csv_row(r: Row, root: Path | None = None) -> dict[str, object]:
    """One CSV line's cells by column name; folders relative to ``root`` (the CSV's folder)."""
    values = {**r.metrics, "speedup": r.speedup, "modeled_speedup_vs_ar": r.modeled_speedup_vs_ar}
    m, w = r.metrics.get("modeled_s"), r.metrics.get("wall_s")
    tag, prov = RunTag.from_summary(r.run.summary), r.run.summary.provenance or {}
    out: dict[str, object] = {
        "method": r.label,
        "method_name": r.run.method,
        "dataset": r.dataset,
        "pair": tag.pair,
        "benchmark": tag.benchmark,
        "git_commit": prov.get("git_commit"),
        "git_dirty": prov.get("git_dirty"),
        "runs": len(r.runs),
        "seeds": ";".join(str(run.summary.seed) for run in r.runs),
        "run_dirs": ";".join(_rel(run.path, root) for run in r.runs),
        "lossless": bool(r.run.summary.lossless),
        "complete": not any(run.incomplete for run in r.runs),
        "temperature": (r.run.summary.sampling or {}).get("temperature"),
        "prompts": r.run.summary.datasets[r.dataset].get("prompts"),
        "modeled_over_wall": m / w if m is not None and w else None,
        "greedy_equal": r.greedy.fraction if r.greedy is not None else None,
        "greedy_prompts": r.greedy.prompts if r.greedy is not None else None,
        "baseline_dir": _rel(r.baseline.path, root) if r.baseline is not None else None,
        "refused": r.refused,
        "timing": ("unreliable" if r.unreliable else "ok") if r.checked else None,
        "timing_reasons": "; ".join(r.unreliable) or None,
    }
    for key in [*METRICS, *[k for k in r.metrics if k.startswith("quality_")]]:
        out[key] = values.get(key)
        out[f"{key}_std"] = r.std.get(key)
    if r.claims_withheld:  # no speedup claimed (rows.py withheld the paired ones)
        for key in ("speedup", "modeled_speedup_vs_ar", "self_modeled_speedup"):
            out[key] = out[f"{key}_std"] = None
    return out


def write_csv(rows: list[Row], path: str | Path) -> Path:
    """Write ``rows`` as CSV to ``path`` (columns: the module docstring)."""
    path = Path(path)
    header = columns(rows)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        for r in rows:
            cells = csv_row(r, path.parent)
            writer.writerow({k: _cell(cells.get(k)) for k in header})
    return path
