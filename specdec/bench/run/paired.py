"""The sweep objective of an eval run: its modeled speedup paired with the ``ar`` run of the same
command, the number the leaderboard shows for it.

Two different numbers answer "how much faster than AR?" and carry different names everywhere
(summary, W&B, CSV, leaderboard):

* ``self_modeled_speedup``: the run alone, its forwards against the AR-equivalent forwards of its
  own tokens, both priced by its own cost table (``specdec.bench.run.summary``); needs no ``ar``
  run.
* ``modeled_speedup_vs_ar``: the run paired with a real ``ar`` run on the same pair and prompts,
  both runs' forwards priced by one table fitted on both logs (``specdec.bench.report.rows``); the
  leaderboard's number.

After its last dataset the runner pairs the run with the ``ar`` run of the same command (the
folder ``python -m specdec.eval method=ar`` with the same overrides writes: ``baseline_dir``; an
``ar`` run is paired with itself) and adds to ``overall``:

* ``modeled_speedup_vs_ar``: the mean over the run's datasets of the leaderboard's
  ``modeled_speedup_vs_ar`` (one dataset: that very value), when that ``ar`` run exists, is
  complete and compares (``specdec.bench.report.runs.mismatches``);
* ``sweep_objective``: what ``python -m specdec.eval`` returns to a sweeper and logs as
  ``eval/overall/sweep_objective`` (``optimized_metric`` default): ``modeled_speedup_vs_ar`` when
  paired, else ``self_modeled_speedup``; ``summary.sweep_objective_source`` says which and why.

Both are stable: a rerun of a complete run reuses the run's calibration
(``specdec.bench.run.calibration.previous_calibration``) and its records, so it reproduces them.

Timing (``specdec.bench.timing``): pairing also reads the load at the run's end and the reasons
against pricing the run with that ``ar`` run (their calibrations disagree, the table fitted on both
logs drops with size beyond its noise, the ``ar`` run's own timing is unreliable: the run's
``timing.paired``). ``overall`` gets ``timing_reliable`` and ``timing_reasons`` (what the loggers
show), and a run whose timing is unreliable claims no speedup: no ``modeled_speedup_vs_ar``, and
``sweep_objective`` NaN, which ``python -m specdec.eval`` returns (Optuna marks a trial whose value
is NaN failed; W&B logs NaN) and ``summary.json`` writes as null; ``sweep_objective_source`` says
why (``SPECDEC_TIMING=lenient`` keeps the numbers beside the flag).
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path

from omegaconf import DictConfig

from specdec.bench.report.rows import build_rows
from specdec.bench.report.runs import Run, read_run
from specdec.bench.run_summary import RunSummary
from specdec.bench.rundir import run_folder_name
from specdec.bench.timing import strict
from specdec.errors import InputError

log = logging.getLogger(__name__)

BASELINE = "ar"


def baseline_dir(
    output_dir: Path,
    method_name: str,
    task_overrides: list[str],
    exclude_keys: list[str],
    baseline: str,
) -> Path:
    """Where ``method=<baseline>`` with the same overrides writes (``conf/eval.yaml``:
    ``.../<method_name>/<override_dirname>``), leaving out the overrides of the method's own parts
    (``drafter*``, ``verifier*``), which the baseline does not have."""
    method_root = output_dir
    while method_root.name != method_name and method_root != method_root.parent:
        method_root = method_root.parent
    kept = sorted(
        o
        for o in task_overrides
        if o.split("=", 1)[0].lstrip("+~") not in exclude_keys
        and not o.lstrip("+~").startswith(("drafter", "verifier"))
    )
    base = method_root.parent / baseline
    return base / run_folder_name(",".join(kept)) if kept else base


def baseline_for(cfg: DictConfig) -> Path | None:
    """The ``ar`` run folder of the command that runs ``cfg`` (None outside a Hydra job)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    hydra = HydraConfig.get()
    return baseline_dir(
        Path(cfg.paths.output_dir),
        str(cfg.method_name),
        list(hydra.overrides.task),
        list(hydra.job.config.override_dirname.exclude_keys),
        BASELINE,
    )


def _read_base(base: Path) -> tuple[Run | None, str]:
    """The ``ar`` run at ``base`` when it can be paired with, else None and why not."""
    hint = f"run `python -m specdec.eval method={BASELINE}` with the same overrides first"
    if not (base / "summary.json").is_file():
        return None, f"no `{BASELINE}` run at {base}; {hint}"
    try:
        run = read_run(base / "summary.json")
    except InputError as err:
        return None, str(err)
    if not run.summary.complete:
        return None, f"the `{BASELINE}` run at {base} is not complete; {hint}"
    return run, ""


def paired_speedup(
    summary: RunSummary, out_dir: Path, base: Path | None, pairing: list[str] | None = None
) -> tuple[float | None, str]:
    """The mean over the run's datasets of its leaderboard ``modeled_speedup_vs_ar`` against the
    ``ar`` run at ``base``; None and why when there is none. ``pairing`` (when given) gets the
    reasons against the pairing's timing beyond the run's own."""
    if base is None:
        return None, "no `ar` run folder known (not a Hydra job)"
    me = Run(Path(out_dir), summary)
    runs = [me]
    if Path(base).resolve() != Path(out_dir).resolve():
        theirs, why = _read_base(Path(base))
        if theirs is None:
            return None, why
        runs.append(theirs)
    mine = [r for r in build_rows(runs, baseline=BASELINE) if r.run is me]
    own = summary.timing.reasons if summary.timing is not None else []
    if pairing is not None:
        pairing += list(dict.fromkeys(x for r in mine for x in r.unreliable if x not in own))
    for r in mine:
        value = r.modeled_speedup_vs_ar
        if value is None or math.isnan(value):
            return None, r.refused or "; ".join(
                r.unreliable
            ) or f"no modeled speedup vs `{BASELINE}` on {r.dataset}"
    if not mine:
        return None, "the run has no dataset"
    return sum(r.modeled_speedup_vs_ar for r in mine) / len(mine), ""


def pair_run(summary: RunSummary, out_dir: Path, base: Path | None) -> None:
    """Add ``modeled_speedup_vs_ar`` (when paired) and ``sweep_objective`` to the summary's
    ``overall``, and ``sweep_objective_source``, in place (see the module docstring)."""
    if not summary.cost_model:
        return  # nothing is priced: no modeled speedup of either kind
    timing, pairing = summary.timing, []
    if timing is not None:
        timing.end()
        timing.paired = []
    try:
        paired, why = paired_speedup(summary, out_dir, base, pairing)
    except (KeyError, TypeError, ValueError) as err:  # an odd `ar` folder never fails the run
        paired, why = None, f"the `{BASELINE}` run at {base} could not be paired ({err!r})"
    overall = summary.overall
    if timing is not None:
        timing.paired = pairing
        overall.update(timing_reliable=timing.reliable, timing_reasons=timing.reasons)
        if not timing.reliable:
            log.warning("%s", timing.line())
        if not timing.reliable and strict():
            overall.pop("modeled_speedup_vs_ar", None)
            overall["sweep_objective"] = math.nan
            summary.sweep_objective_source = (
                "not a number: timing unreliable (" + "; ".join(timing.reasons) + ")"
            )
            return
    if paired is not None:
        overall.update(modeled_speedup_vs_ar=paired, sweep_objective=paired)
        summary.sweep_objective_source = f"modeled_speedup_vs_ar (paired with {base})"
        return
    own = overall.get("self_modeled_speedup")
    if own is not None:
        overall["sweep_objective"] = own
    summary.sweep_objective_source = f"self_modeled_speedup ({why})"


def in_sweep() -> bool:
    """Whether an optimising sweep reads what ``main`` returns: under ``wandb agent``
    (``WANDB_SWEEP_ID``) or a Hydra sweeper other than the basic one (Optuna). The basic sweeper
    of ``conf/eval.yaml``'s method grid reads nothing."""
    if os.environ.get("WANDB_SWEEP_ID"):
        return True
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return False
    target = str(HydraConfig.get().sweeper.get("_target_", ""))
    return bool(target) and not target.endswith("BasicSweeper")
