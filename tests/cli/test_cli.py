"""The main job's CLI on the tiny pair: prints the summary table and writes summary.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

METRICS = {
    "new_tokens",
    "target_forwards",
    "block_efficiency",
    "acceptance_rate",
    "tokens_per_s",
    "wall_s",
    "rollback_rate",
    "discard_rate",
    "verification_rate",
    "per_position_acceptance",
}


@pytest.mark.parametrize("method", ["ar", "sps"])
def test_eval_cli_writes_summary(tmp_path, method):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "benchmark=tiny",
        f"method={method}",
        "hydra.mode=RUN",
        f"hydra.run.dir={tmp_path}",
        "logger=none",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "τ" in proc.stdout and method in proc.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["method"] == method and summary["lossless"] is True
    for metrics in summary["datasets"].values():
        assert METRICS <= set(metrics)
        assert metrics["new_tokens"] > 0


def test_eval_cli_rejects_unknown_key(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "gama=3",
        "hydra.mode=RUN",
        f"hydra.run.dir={tmp_path}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "gama" in proc.stderr


def test_default_eval_sweeps_ar_sps_and_feature_drafters_and_prints_the_leaderboard(compose):
    cfg = compose("eval", ["model=smollm2", "benchmark=default"])  # what no overrides selects
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN"
    assert cfg.hydra.sweeper.params.method == "ar,sps,pld,eagle3,specblock"
    assert cfg.model._target_.endswith("smollm2_pair") and cfg.model.draft == "trained"
    assert sorted(cfg.benchmark.datasets) == ["alpaca", "gsm8k", "humaneval"]
    assert (
        cfg.hydra.callbacks.leaderboard._target_ == "specdec.bench.run.leaderboard.PrintLeaderboard"
    )


def test_sweep_prints_a_leaderboard_with_the_speedup_of_sps(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "benchmark=tiny",
        "limit=2",
        "max_new_tokens=8",
        "warmup=0",
        "progress=false",
        f"paths.log_dir={tmp_path}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    boards = tmp_path / "eval" / "tiny" / "tiny" / "leaderboard"
    (board,) = boards.glob("ar+eagle3+pld+specblock+sps-*/leaderboard.md")
    text = board.read_text()
    assert text in proc.stdout
    rows = [line for line in text.splitlines() if line.startswith("| sps | tiny | yes")]
    assert len(rows) == 1 and "x |" in rows[0], text  # a speedup cell like "1.07x"
    # method=sps alone (here with its own gamma) reuses the ar run of the same command
    proc = subprocess.run(
        [*cmd, "method=sps", "drafter.policy.gamma=2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| ar | tiny" in proc.stdout and "| sps | tiny | yes" in proc.stdout
    assert "refused" not in proc.stdout
    assert board.read_text() == text  # the first sweep's board is not overwritten
