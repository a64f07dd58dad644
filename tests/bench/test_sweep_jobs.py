"""A multirun's jobs: one pair load for consecutive jobs on one pair
(``specdec.bench.run.pair_cache``), and a failing job that does not sink the sweep
(``specdec.bench.run.failures``, the leaderboard callback): its error goes into its summary, the
next jobs run, and the sweep exits non-zero naming it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf

import specdec.bench.run.failures as fl
from specdec.bench.run.leaderboard import PrintLeaderboard
from specdec.bench.run.pair_cache import release, shared_pair
from specdec.errors import BadInput
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO

ROOT = REPO


def test_consecutive_jobs_on_one_pair_config_share_one_load(tmp_path):
    model = eval_cfg(tmp_path, ["method=sps"]).model
    first = shared_pair(model, share=True)
    # a tree method on flash-attention switches the pair's attention and notes it in its
    # placement (and the requested one in info)
    first.placement = dataclasses.replace(first.placement, attention="sdpa")
    first.info["attention_requested"] = "flash_attention_2"
    first.target.set_attn_implementation("eager")
    again = shared_pair(model, share=True)
    assert again is first  # not loaded again ...
    assert again.placement.attention == "specdec_sdpa"  # ... but handed over as loaded
    assert "attention_requested" not in again.info
    assert again.target.config._attn_implementation == "specdec_sdpa"
    other = model.copy()
    other.seed = 5
    assert shared_pair(other, share=True) is not first  # another pair config loads its own
    assert shared_pair(model, share=True) is not first  # and the first was let go
    held = shared_pair(model, share=True)
    with torch.no_grad():
        held.target.lm_head.weight.mul_(2.0)  # a job that wrote the weights
    assert shared_pair(model, share=True) is not held
    assert shared_pair(model, share=False) is not shared_pair(model, share=False)  # single runs
    release()


def job_return(out: Path, status: JobStatus, value: object) -> JobReturn:
    hydra = {
        "runtime": {"output_dir": str(out)},
        "overrides": {"task": []},
        "job": {"config": {"override_dirname": {"exclude_keys": []}}},
    }
    return JobReturn(
        hydra_cfg=OmegaConf.create({"hydra": hydra}), status=status, _return_value=value
    )


def test_a_failing_job_records_its_error_and_the_sweep_exits_naming_it(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(fl, "_FAILED", [])
    bug, bad = tmp_path / "sps" / "bug", tmp_path / "sps" / "bad"

    def crash(cfg):
        raise RuntimeError("index out of range\nsecond line")

    def refuse(cfg):
        raise BadInput("max_new_tokens must be >= 1; set max_new_tokens=8")

    assert fl.run_job(crash, eval_cfg(bug, ["method=sps"])) is None  # no exception escapes
    assert fl.run_job(refuse, eval_cfg(bad, ["method=sps"])) is None
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: index out of range" in err  # a bug: traceback
    assert "error: max_new_tokens must be >= 1; set max_new_tokens=8\n" in err  # input: one line
    summary = json.loads((bug / "summary.json").read_text())
    assert summary["complete"] is False and summary["error"] == "RuntimeError: index out of range"
    assert summary["method"] == "sps" and summary["datasets"] == {}
    # the callback leaves failed jobs out of the board, names them and exits 1 (a bug) ...
    callback = PrintLeaderboard(plots=False)
    config = OmegaConf.create({"method_name": "sps"})
    for out in (bug, bad):
        callback.on_job_end(config, job_return(out, JobStatus.COMPLETED, None))
    callback.on_job_end(config, job_return(tmp_path / "x", JobStatus.FAILED, KeyError("k")))
    assert callback.dirs == []
    assert [f.run_dir for f in callback.failed] == [bug, bad, tmp_path / "x"]
    with pytest.raises(SystemExit) as stop:
        callback.on_multirun_end(OmegaConf.create({}))
    assert stop.value.code == 1
    err = capsys.readouterr().err
    assert "error: 3 sweep job(s) failed" in err and f"sps ({bad}) (its error is above)" in err
    assert "max_new_tokens must be >= 1" not in err  # printed once, when the job failed
    # ... and 2 when every failure was an input error
    assert fl.exit_status([f for f in callback.failed if f.bad_input]) == 2
    assert fl.exit_status([]) == 0


def test_a_job_failing_elsewhere_is_read_from_its_summary(tmp_path, monkeypatch):
    monkeypatch.setattr(fl, "_FAILED", [])
    assert fl.mark_failed(tmp_path, "ar", "error: no such dataset")
    (failure,) = [fl.job_failure(tmp_path, "ar", True)]
    assert failure.line == "error: no such dataset" and failure.bad_input
    assert fl.job_failure(tmp_path / "ok", "ar", True) is None


@pytest.mark.slow
def test_a_cli_multirun_runs_past_a_failing_job_and_loads_the_pair_once(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "benchmark=tiny",
        "method=ar,sps",
        "max_new_tokens=4,0",
        "limit=1",
        "warmup=0",
        "cost_model=false",
        "progress=false",
        "optimized_metric=null",
        f"paths.log_dir={tmp_path}",
        f"paths.cache_dir={tmp_path / 'cache'}",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]  # both failures are input errors
    done = list(tmp_path.glob("eval/tiny/tiny/*/*max_new_tokens=4/summary.json"))
    failed = list(tmp_path.glob("eval/tiny/tiny/*/*max_new_tokens=0/summary.json"))
    assert len(done) == len(failed) == 2  # ar and sps each: one finished, one refused
    assert all(json.loads(p.read_text())["complete"] for p in done)
    for p in failed:
        summary = json.loads(p.read_text())
        assert summary["complete"] is False and summary["error"].startswith("error: ")
    assert "error: 2 sweep job(s) failed" in proc.stderr
    assert "Failed jobs (not in the table)" in proc.stdout
    assert out.count("reusing the one loaded by an earlier job") == 1  # sps reused ar's pair
