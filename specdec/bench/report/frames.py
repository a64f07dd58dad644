"""pandas views of eval runs, for ``notebooks/analysis.ipynb`` and interactive analysis.

The numbers come from the report's own objects (``report.load_runs`` / ``report.build_rows``:
the same speedups, refusals and labels as ``leaderboard.md``) and from the records
(``records.iter_records``); nothing here recomputes a metric except ``tau`` per prompt
(new tokens / target forwards, the block efficiency of one prompt).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from specdec.bench.records import iter_records
from specdec.bench.report.board import Row, Run
from specdec.errors import MissingInput

LEADERBOARD_COLUMNS = [
    "method",
    "dataset",
    "lossless",
    "prompts",
    "complete",
    "tokens_per_s",
    "speedup",
    "tau",
    "acceptance",
    "modeled_speedup_vs_ar",
    "refused",
    "run",
]


def newest_runs(root: str | Path) -> Path:
    """The folder to analyse by default: the newest eval run under ``root`` (``outputs/``) with
    its sibling methods, i.e. its ``eval/<model>/<benchmark>/`` folder (``conf/eval.yaml``'s run
    directories share one pair and benchmark there); a run elsewhere (``hydra.run.dir=``) alone.

    Raises:
        FileNotFoundError: when no ``summary.json`` lies under ``root``.
    """
    root = Path(root)
    found = [p for p in root.rglob("summary.json") if p.parent.name != "summary"]
    if not found:
        raise MissingInput(
            f"no summary.json under {root}; run `python -m specdec.eval` "
            "first or set RUN_DIR to a run folder"
        )
    newest = max(found, key=lambda p: p.stat().st_mtime).parent
    parts = newest.relative_to(root).parts
    if len(parts) >= 4 and parts[0] == "eval":  # eval/<model>/<benchmark>/<method>[/<overrides>]
        return root.joinpath(*parts[:3])
    return newest


def leaderboard_frame(rows: list[Row]) -> pd.DataFrame:
    """One row per (method run, dataset) of ``report.build_rows``, in its order: ``speedup`` vs
    the baseline (NaN where refused; ``refused`` says why), ``tau`` (block efficiency),
    ``acceptance`` (accepted / drafted), ``tokens_per_s``, ``modeled_speedup_vs_ar``."""
    frame = pd.DataFrame(
        [
            {
                "method": r.label or r.run.method,
                "dataset": r.dataset,
                "lossless": r.run.summary.lossless,
                "prompts": r.metrics.get("prompts"),
                "complete": r.run.incomplete is None,
                "tokens_per_s": r.metrics.get("tokens_per_s"),
                "speedup": r.speedup,
                "tau": r.metrics.get("block_efficiency"),
                "acceptance": r.metrics.get("acceptance_rate"),
                "modeled_speedup_vs_ar": r.modeled_speedup_vs_ar,
                "refused": r.refused,
                "run": str(r.run.path),
            }
            for r in rows
        ],
        columns=LEADERBOARD_COLUMNS,
    )
    for col in ("tokens_per_s", "speedup", "tau", "acceptance", "modeled_speedup_vs_ar"):
        frame[col] = pd.to_numeric(frame[col]).astype(float)  # None (undefined, refused): NaN
    return frame


def records_frame(runs: list[Run]) -> pd.DataFrame:
    """One row per recorded prompt of each run's current configuration (records whose
    ``config_hash`` is the summary's): the records' scalar fields, ``run`` and ``tau``."""
    rows = [
        {"run": str(run.path), **{k: v for k, v in rec.items() if not isinstance(v, (list, dict))}}
        for run in runs
        for rec in iter_records(run.path)
        if rec.get("config_hash") == run.summary.config_hash
    ]
    frame = pd.DataFrame(rows)
    if not frame.empty:
        frame["tau"] = frame["new_tokens"] / frame["target_forwards"]
    return frame
