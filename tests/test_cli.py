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
        f"method={method}",
        f"hydra.run.dir={tmp_path}",
        "logger=none",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "block eff." in proc.stdout and method in proc.stdout
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
        f"hydra.run.dir={tmp_path}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "gama" in proc.stderr
