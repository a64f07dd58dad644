"""``leaderboard.csv``: the leaderboard as one table, one row per (method row, dataset).

Written by ``specdec.bench.report`` beside ``leaderboard.md``; ``pandas.read_csv`` reads it as it
is (a header line, comma-separated, empty cells for undefined values, which pandas reads as NaN).
Columns, in order:

* ``method``: the row's label (``sps``, or ``sps (<folder>)`` when a method has several rows on
  one dataset); ``method_name``: the preset; ``dataset``;
* ``runs``: runs merged into the row (repeats over seeds, ``specdec.bench.repeats``);
  ``seeds``: their seeds, ``;``-separated; ``run_dirs``: their folders, ``;``-separated;
* ``lossless``, ``complete``: ``True`` / ``False`` (complete: every run of the row finished);
* ``temperature``; ``prompts``;
* for each of ``METRICS``: the value (the mean for merged rows) and ``<metric>_std``, the sample
  standard deviation over the runs (empty for a single run): tokens/s, the wall-clock
  ``speedup`` and ``modeled_speedup`` against the baseline run, ``self_modeled_speedup`` (the
  run's own estimate against AR-equivalent forwards, ``specdec.bench.summary``), τ
  (``block_efficiency``), acceptance, rollback, discard and verification rates, the hit rate
  of methods that draft ahead and SpecBranch's branches per step (``specdec.metrics``; empty
  for the others), ``wall_s``,
  ``modeled_s``;
* ``modeled_over_wall``: ``modeled_s / wall_s``;
* ``greedy_equal``: share of prompts whose temperature-0 output equals the baseline's
  (``specdec.bench.greedy``; empty: not compared), ``greedy_prompts``: prompts compared;
* ``baseline_dir``: the baseline run paired with the row; ``refused``: why a speedup was refused;
* ``quality_<name>`` and ``quality_<name>_std`` for each quality check measured.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from specdec.bench.rows import Row

METRICS = ("tokens_per_s", "speedup", "modeled_speedup", "self_modeled_speedup",
           "block_efficiency", "acceptance_rate", "rollback_rate", "discard_rate",
           "verification_rate", "hit_rate", "branches_per_step", "wall_s", "modeled_s")
SUMMARY_KEY = {"self_modeled_speedup": "modeled_speedup"}  # CSV column -> key in the summary


def _cell(value: object) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


def columns(rows: list[Row]) -> list[str]:
    """The header: the fixed columns, then the quality columns the rows have."""
    quality = sorted({k for r in rows for k in r.metrics if k.startswith("quality_")})
    return ["method", "method_name", "dataset", "runs", "seeds", "run_dirs", "lossless",
            "complete", "temperature", "prompts",
            *[c for m in METRICS for c in (m, f"{m}_std")], "modeled_over_wall",
            "greedy_equal", "greedy_prompts", "baseline_dir", "refused",
            *[c for q in quality for c in (q, f"{q}_std")]]


def csv_row(r: Row) -> dict[str, object]:
    """One CSV line's cells by column name."""
    values = {**r.metrics, "speedup": r.speedup, "modeled_speedup": r.modeled_speedup}
    std = dict(r.std)
    for column, key in SUMMARY_KEY.items():  # the summary's own metric under its CSV name
        values[column], std[column] = r.metrics.get(key), r.std.get(key)
    m, w = r.metrics.get("modeled_s"), r.metrics.get("wall_s")
    out: dict[str, object] = {
        "method": r.label, "method_name": r.run.method, "dataset": r.dataset, "runs": len(r.runs),
        "seeds": ";".join(str(run.summary.get("seed")) for run in r.runs),
        "run_dirs": ";".join(str(run.path) for run in r.runs),
        "lossless": bool(r.run.summary.get("lossless")),
        "complete": not any(run.incomplete for run in r.runs),
        "temperature": (r.run.summary.get("sampling") or {}).get("temperature"),
        "prompts": r.run.summary["datasets"][r.dataset].get("prompts"),
        "modeled_over_wall": m / w if m is not None and w else None,
        "greedy_equal": r.greedy.fraction if r.greedy is not None else None,
        "greedy_prompts": r.greedy.prompts if r.greedy is not None else None,
        "baseline_dir": str(r.baseline.path) if r.baseline is not None else None,
        "refused": r.refused,
    }
    for key in [*METRICS, *[k for k in r.metrics if k.startswith("quality_")]]:
        out[key] = values.get(key)
        out[f"{key}_std"] = std.get(key)
    return out


def write_csv(rows: list[Row], path: str | Path) -> Path:
    """Write ``rows`` as CSV to ``path`` (columns: the module docstring)."""
    path = Path(path)
    header = columns(rows)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        for r in rows:
            cells = csv_row(r)
            writer.writerow({k: _cell(cells.get(k)) for k in header})
    return path
