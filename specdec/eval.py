"""``python -m specdec.eval``: benchmark method presets on a model pair (Hydra entry point).

The work is ``specdec.bench.run.runner.run``; this file only binds it to ``conf/eval.yaml``.
``main`` returns the run's ``optimized_metric`` (``overall``; default ``sweep_objective``: the run's
modeled speedup paired with the ``ar`` run of the same command, the leaderboard's
``modeled_speedup_vs_ar``, or without that run the run's own stable estimate
``self_modeled_speedup``; ``specdec.bench.run.paired``), the value a Hydra sweeper such as Optuna
(``hparams_search=...``, ``conf/hparams_search/``) maximises. In a multirun a
failing job records its error and the next job runs (``specdec.bench.run.failures``).
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from specdec.bench.run.failures import in_multirun, run_job
from specdec.bench.run.launcher import stop_with_launcher
from specdec.bench.run.paired import in_sweep
from specdec.bench.run.runner import run
from specdec.bench.run.summary import sweep_metric
from specdec.bench.rundir import register_run_name
from specdec.cli_check import check_command_line
from specdec.config import register_resolvers
from specdec.errors import exit_on_input_error


def evaluate(cfg: DictConfig) -> float | None:
    """Run one eval job; returns its ``optimized_metric`` (None: none chosen or undefined)."""
    return sweep_metric(run(cfg), cfg.get("optimized_metric"), sweeping=in_sweep())


@hydra.main(version_base="1.3", config_path="../conf", config_name="eval")
def main(cfg: DictConfig) -> float | None:
    """Run one eval job (a multirun calls it once per method preset); returns the sweep metric.
    A bad input ends the run with its message and status 2, without a traceback (errors.py); in a
    multirun a failed job is recorded and the sweep goes on (``specdec.bench.run.failures``)."""
    with exit_on_input_error():
        # a torchrun rank ends when its agent dies (specdec.bench.run.launcher)
        stop_with_launcher()
        return run_job(evaluate, cfg) if in_multirun() else evaluate(cfg)


if __name__ == "__main__":
    register_resolvers()
    register_run_name()  # ${specdec_run_name:...}: the run folder's last name (conf/eval.yaml)
    with exit_on_input_error():  # Hydra's own errors come before main: cli_check.py
        check_command_line(sys.argv[1:], "eval")
    main()
