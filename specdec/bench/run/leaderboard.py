"""Hydra callback: after an eval multirun, print the leaderboard of its jobs (``specdec.report``).

``conf/eval.yaml`` runs in MULTIRUN mode and sweeps ``method=ar,sps`` by default, so
``python -m specdec.eval`` with no overrides benchmarks both and ends with their Markdown
leaderboard (speedup of ``sps`` over ``ar``). A sweep that does not include the baseline still
gets a speedup column when the baseline's run directory for the same command exists (the sibling
folder named after it).

The leaderboard (``leaderboard.md``, ``leaderboard.csv``) and its plots go to
``<common parent>/leaderboard/<baseline+methods>-<hash>/`` (the hash is over the run folders),
with a copy of the sweep's own files from ``hydra.sweep.dir`` (``multirun.yaml``, and Optuna's
``optimization_results.yaml``), which every sweep writes to that one shared folder: the next sweep
overwrites them there, not beside this board. When
the sweep's ``logger`` has a ``report`` node (``logger=wandb``: ``WandbReport``), that folder is
also logged as a W&B ``leaderboard`` artifact, in the runs' group when they share one.
A job that failed (``specdec.bench.run.failures``) is left out of the board and listed under it; the
sweep then exits with status 2 (input errors only) or 1. Jobs are collected in ``on_job_end``,
i.e. in the launcher's process: with a remote launcher the callback only prints the
``specdec.report`` command to run. Under ``torchrun`` (every rank runs the sweep,
``specdec.bench.run.ranks``) only rank 0 writes, prints and logs the leaderboard.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from specdec.bench.run.failures import Failure, end_sweep, job_failure, summary_error
from specdec.bench.run.paired import baseline_dir
from specdec.bench.run.ranks import Ranks
from specdec.bench.wandb_artifacts import common_group
from specdec.errors import InputError

__all__ = ["PrintLeaderboard", "baseline_dir"]

log = logging.getLogger(__name__)
SWEEP_FILES = ("multirun.yaml", "optimization_results.yaml")  # written into hydra.sweep.dir


def keep_sweep_files(config: DictConfig, out: Path) -> list[Path]:
    """Copy the sweep's ``SWEEP_FILES`` from ``hydra.sweep.dir`` into ``out``; the copies."""
    sweep_dir = OmegaConf.select(config, "hydra.sweep.dir")
    found = [Path(str(sweep_dir)) / name for name in SWEEP_FILES] if sweep_dir else []
    return [Path(shutil.copy2(f, out / f.name)) for f in found if f.is_file()]


class PrintLeaderboard(Callback):
    """Collects the finished jobs' run directories and reports them at the end of the multirun.

    Args:
        baseline: method name of the speedup baseline (``ar``).
        plots: also write the PNG plots.
    """

    def __init__(self, baseline: str = "ar", plots: bool = True) -> None:
        self.baseline, self.plots = baseline, plots
        self.dirs: list[Path] = []
        self.methods: list[str] = []
        self.failed: list[Failure] = []  # jobs that failed (specdec.bench.run.failures)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if job_return.hydra_cfg is None:
            return
        hydra_cfg = job_return.hydra_cfg.hydra
        out = Path(hydra_cfg.runtime.output_dir)
        completed = job_return.status == JobStatus.COMPLETED
        failure = job_failure(
            out,
            str(OmegaConf.select(config, "method_name")),
            completed,
            None if completed else job_return._return_value,
        )
        if failure is not None:  # listed at the end of the sweep, left out of the board
            self.failed.append(failure)
            return
        self.dirs.append(out)
        self.methods.append(str(config.method_name))
        base = baseline_dir(
            out,
            str(config.method_name),
            list(hydra_cfg.overrides.task),
            list(hydra_cfg.job.config.override_dirname.exclude_keys),
            self.baseline,
        )
        if (
            (base / "summary.json").exists()
            and base not in self.dirs
            and summary_error(base) is None
        ):
            self.dirs.append(base)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Print the board of the finished jobs, then name the failed ones and exit non-zero
        (``specdec.bench.run.failures.end_sweep``)."""
        self.board(config)
        end_sweep(self.failed)

    def board(self, config: DictConfig) -> None:
        """Write, print (and log) the leaderboard of the finished jobs."""
        from specdec.bench.report.board import report

        if not Ranks.from_env().main:  # rank 0 of a torchrun eval reports for every rank
            return

        runs = [d for d in dict.fromkeys(self.dirs) if (d / "summary.json").exists()]
        if not runs:
            print("no finished eval jobs here; report with `python -m specdec.report <run dirs>`")
            return
        # one folder per set of runs (methods + a hash of their folders): rerunning a sweep
        # rewrites its own board, another sweep does not overwrite it
        digest = hashlib.sha1("\n".join(sorted(map(str, runs))).encode()).hexdigest()[:8]
        name = "+".join(sorted(set(self.methods) | {self.baseline})) + "-" + digest
        out = Path(os.path.commonpath([str(d.parent) for d in runs])) / "leaderboard" / name
        try:
            text, rows = report(runs, out, baseline=self.baseline, plots=self.plots)
        except (ValueError, InputError) as err:  # e.g. runs that cannot share a table
            print(f"leaderboard not written: {err}")
            return
        keep_sweep_files(config, out)
        if self.failed:  # the board says which jobs are missing from it (their errors: on
            # stderr, once; in the board's file, with each job)
            failed = "".join(f"- {f.method} (`{f.run_dir}`): {f.line}\n" for f in self.failed)
            text += "\n\nFailed jobs (not in the table):\n\n" + "".join(
                f"- {f.method} (`{f.run_dir}`): see stderr\n" for f in self.failed
            )
            with (out / "leaderboard.md").open("a", encoding="utf-8") as md:
                md.write(f"\n## Failed jobs\n\n{failed}")
        print(text)
        print(f"leaderboard and plots: {out}")
        node = OmegaConf.select(config, "logger.report")
        if node is not None:  # e.g. logger=wandb: the folder as a W&B artifact
            group = common_group([run.summary for r in rows for run in r.runs])
            name = instantiate(node).log(out, group=group)
            print(f"logged {out} as artifact {name}")
        print("  merge other runs: python -m specdec.report " + " ".join(map(str, runs)))
