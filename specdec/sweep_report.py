"""Hydra callback: after an eval multirun, print the leaderboard of its jobs (``specdec.report``).

``conf/eval.yaml`` runs in MULTIRUN mode and sweeps ``method=ar,sps`` by default, so
``python -m specdec.eval`` with no overrides benchmarks both and ends with their Markdown
leaderboard (speedup of ``sps`` over ``ar``). A sweep that does not include the baseline still
gets a speedup column when the baseline's run directory for the same command exists (the sibling
folder named after it).

The leaderboard and its plots are written to ``<common parent of the job dirs>/leaderboard/``.
Jobs are collected in ``on_job_end``, i.e. in the launcher's process: with a remote launcher the
callback only prints the ``specdec.report`` command to run.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


def baseline_dir(output_dir: Path, override_dirname: str, baseline: str) -> Path:
    """Where ``method=<baseline>`` with the same other overrides writes (see ``conf/eval.yaml``:
    ``.../<method_name>/<override_dirname>``)."""
    return (output_dir.parent.parent / baseline / output_dir.name if override_dirname
            else output_dir.parent / baseline)


class PrintLeaderboard(Callback):
    """Collects the finished jobs' run directories and reports them at the end of the multirun.

    Args:
        baseline: method name of the speedup baseline (``ar``).
        plots: also write the PNG plots.
    """

    def __init__(self, baseline: str = "ar", plots: bool = True) -> None:
        self.baseline, self.plots = baseline, plots
        self.dirs: list[Path] = []

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if job_return.status != JobStatus.COMPLETED or job_return.hydra_cfg is None:
            return
        hydra_cfg = job_return.hydra_cfg.hydra
        out = Path(hydra_cfg.runtime.output_dir)
        self.dirs.append(out)
        base = baseline_dir(out, hydra_cfg.job.override_dirname, self.baseline)
        if (base / "summary.json").exists() and base not in self.dirs:
            self.dirs.append(base)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from specdec.report import report

        runs = [d for d in dict.fromkeys(self.dirs) if (d / "summary.json").exists()]
        if not runs:
            print("no finished eval jobs here; report with `python -m specdec.report <run dirs>`")
            return
        out = Path(os.path.commonpath([str(d) for d in runs])) / "leaderboard"
        if len(runs) == 1:
            out = runs[0] / "leaderboard"
        try:
            text, _ = report(runs, out, baseline=self.baseline, plots=self.plots)
        except ValueError as err:  # e.g. runs that cannot share a table
            print(f"leaderboard not written: {err}")
            return
        print(text)
        print(f"leaderboard and plots: {out}")
        print("  merge other runs: python -m specdec.report " + " ".join(map(str, runs)))
