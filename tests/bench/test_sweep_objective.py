"""One meaning per metric name: the sweep objective is the leaderboard's paired number.

``sweep_objective`` (what ``specdec.eval``'s main returns, W&B's ``eval/overall/sweep_objective``)
is the run's ``modeled_speedup_vs_ar`` against the ``ar`` run of the same command when that run
exists, the very value ``leaderboard.csv`` shows; otherwise the run's own ``self_modeled_speedup``,
which a rerun of a complete run reproduces (its calibration is reused). Jobs run in-process as
Hydra would run them: the composed config with its ``hydra`` node set as the job's HydraConfig,
in the folders ``conf/eval.yaml`` gives them (``<root>/<method>/<override_dirname>``).
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import pytest
from hydra.core.hydra_config import HydraConfig

import specdec.bench.run.calibration as calibration
import specdec.eval as entry
from specdec.bench.report import board as rp
from specdec.config import compose_config
from specdec.errors import BadInput
from specdec.testing.eval_cfg import eval_cfg

# not excluded from the folder name (conf/eval.yaml: override_dirname): the job's folder is
# <root>/<method>/max_new_tokens=6, where Hydra puts it
COMMON = [
    "model=tiny",
    "benchmark=tiny",
    "limit=2",
    "max_new_tokens=6",
    "warmup=0",
    "progress=false",
    "logger=csv",
]


def hydra_job(root: Path, method: str):
    """The config of ``python -m specdec.eval method=<method> <COMMON>`` as its Hydra job, with
    that job's HydraConfig set (undone by the ``no_hydra`` fixture)."""
    cfg = compose_config("eval", [f"method={method}", *COMMON])
    out = root / method / "max_new_tokens=6"
    cfg.hydra.runtime.output_dir = str(out)
    cfg.hydra.overrides.task = [f"method={method}", *COMMON]
    cfg.paths.output_dir, cfg.paths.cache_dir = str(out), str(root / "cache")
    HydraConfig.instance().set_config(cfg)
    return cfg, out


@pytest.fixture
def no_hydra():
    yield
    HydraConfig.instance().cfg = None


def _summary(path: Path) -> dict:
    return json.loads((path / "summary.json").read_text())


def _logged(path: Path, metric: str) -> float:
    """What ``logger=csv`` logged as ``overall/<metric>``."""
    with (path / "metrics.csv").open() as f:
        return next(
            float(r["value"])
            for r in csv.DictReader(f)
            if r["dataset"] == "overall" and r["metric"] == metric
        )


def test_the_sweeps_objective_is_the_leaderboards_paired_value(tmp_path, no_hydra):
    ar_cfg, ar_dir = hydra_job(tmp_path, "ar")
    assert entry.evaluate(ar_cfg) == 1.0  # ar is paired with itself
    sps_cfg, sps_dir = hydra_job(tmp_path, "sps")
    value = entry.evaluate(sps_cfg)
    summary = _summary(sps_dir)
    assert summary["sweep_objective_source"].startswith("modeled_speedup_vs_ar")
    assert value == summary["overall"]["sweep_objective"] == _logged(sps_dir, "sweep_objective")
    text, _ = rp.report([ar_dir, sps_dir], tmp_path / "board", plots=False)
    assert f"| sps | {value:.2f}x | {value:.4f}x |" in text  # the board's mean: the objective
    with (tmp_path / "board" / "leaderboard.csv").open() as f:
        board = {r["method"]: r for r in csv.DictReader(f)}
    assert value == float(board["sps"]["modeled_speedup_vs_ar"])  # the number the board shows
    own = summary["overall"]["self_modeled_speedup"]
    assert float(board["sps"]["self_modeled_speedup"]) == own  # the other number, its own name
    assert "modeled_speedup" not in summary["overall"]  # the name that meant both is gone


def test_without_an_ar_run_the_objective_is_the_runs_own_estimate(tmp_path, no_hydra):
    cfg, out = hydra_job(tmp_path, "sps")
    value = entry.evaluate(cfg)
    summary = _summary(out)
    assert value == summary["overall"]["self_modeled_speedup"]
    assert "modeled_speedup_vs_ar" not in summary["overall"]
    source = summary["sweep_objective_source"]
    assert source.startswith("self_modeled_speedup (no `ar` run at ")
    assert str(tmp_path / "ar" / "max_new_tokens=6") in source


def test_an_unusable_ar_summary_falls_back_and_says_why(tmp_path, no_hydra):
    base = tmp_path / "ar" / "max_new_tokens=6"
    base.mkdir(parents=True)
    (base / "summary.json").write_text('{"method": "ar", "complete": true}')  # no datasets
    cfg, out = hydra_job(tmp_path, "sps")
    value = entry.evaluate(cfg)  # the run itself still finishes
    summary = _summary(out)
    assert value == summary["overall"]["self_modeled_speedup"]
    assert "not an eval summary" in summary["sweep_objective_source"]


def test_a_rerun_of_a_complete_run_reuses_its_calibration_and_reproduces_it(tmp_path, monkeypatch):
    cfg = eval_cfg(tmp_path, ["method=sps", "warmup=0", "progress=false"])
    first = entry.evaluate(cfg)

    def no_calibration(*args, **kwargs):
        raise AssertionError("a complete run was calibrated again")

    monkeypatch.setattr(calibration, "calibrate", no_calibration)
    assert entry.evaluate(cfg) == first  # nothing generated, nothing measured: the same number
    assert _summary(tmp_path)["overall"]["self_modeled_speedup"] == first


def test_an_undefined_objective_warns_only_in_a_sweep(tmp_path, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG, logger="specdec.bench.run.summary")
    assert (
        entry.evaluate(eval_cfg(tmp_path / "a", ["method=ar", "limit=1", "cost_model=false"]))
        is None
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    monkeypatch.setenv("WANDB_SWEEP_ID", "abc")  # as under `wandb agent`
    assert (
        entry.evaluate(eval_cfg(tmp_path / "b", ["method=ar", "limit=1", "cost_model=false"]))
        is None
    )
    assert any(
        "the sweeper gets None" in r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
    )


def test_the_old_ambiguous_name_is_refused_with_the_new_ones(tmp_path):
    with pytest.raises(
        BadInput,
        match="optimized_metric='modeled_speedup' was renamed.*"
        "sweep_objective.*self_modeled_speedup.*"
        "modeled_speedup_vs_ar",
    ):
        entry.evaluate(eval_cfg(tmp_path, ["method=ar", "optimized_metric=modeled_speedup"]))
