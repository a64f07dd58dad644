"""The adaptive-length presets run end to end on the tiny pair (CLI and in-process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from specdec.drafters.policies import AdaEDL, DraftState, Heuristic


def test_specdecpp_eval_cli_runs_with_the_shipped_tiny_head(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "method=specdecpp",
        "limit=1",
        "max_new_tokens=8",
        "warmup=0",
        "threads=1",
        "sampling.temperature=1.0",
        "benchmark=tiny",
        "hydra.mode=RUN",
        f"hydra.run.dir={tmp_path}",
        "logger=none",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    metrics = summary["datasets"]["tiny"]
    assert summary["method"] == "specdecpp" and metrics["drafted"] > 0
    assert summary["config"]["drafter"]["policy"]["head"].endswith("specdecpp/tiny")


@pytest.mark.parametrize("method", ["adaedl", "sps_heuristic"])
def test_adaptive_presets_run_in_process(compose, method):
    from specdec.bench.run.runner import run

    cfg = compose(
        "eval",
        [
            "model=tiny",
            f"method={method}",
            "limit=1",
            "warmup=0",
            "max_new_tokens=8",
            "sampling.temperature=1.0",
        ],
    )
    summary = run(cfg)
    assert summary["method"] == method and summary["lossless"] is True
    assert summary["datasets"]["tiny"]["drafted"] > 0


def test_heuristic_follows_the_transformers_schedule():
    policy = Heuristic(initial=5, max_len=8)
    lengths = []
    for drafted_accepted in [(5, 5), (7, 7), (8, 8), (8, 3), (7, 0)]:
        lengths.append(policy.limit())
        policy.observe(*drafted_accepted)
    assert lengths == [5, 7, 8, 8, 7] and policy.limit() == 6
    policy.reset()
    assert policy.limit() == 5
    for _ in range(10):
        policy.observe(policy.limit(), 0)
    assert policy.limit() == 1  # floor


def test_adaedl_threshold_tracks_the_bound_slack():
    policy = AdaEDL(threshold=0.5, entropy_scale=0.2, min_len=1, max_len=8, ema=0.0)
    q = torch.tensor([0.5, 0.5])  # H = ln 2, bound = 1 - sqrt(0.2 ln 2) ≈ 0.628
    bound = 1 - (0.2 * torch.log(torch.tensor(2.0))).sqrt().item()
    assert policy.should_draft(DraftState(0, q)) and policy.should_draft(DraftState(1, q))
    policy.observe(2, 2)  # both accepted: per-token acceptance 1, slack = 1 - bound
    assert policy.lam == pytest.approx(max(0.0, 0.5 - (1 - bound)))
    for d in range(2):
        policy.should_draft(DraftState(d, q))
    policy.observe(2, 0)  # first rejected: one reached token, acceptance 0
    assert policy.lam == pytest.approx(min(1.0, 0.5 + bound))
    assert policy.should_draft(DraftState(0, q)) and not policy.should_draft(DraftState(1, q))
