"""Data-parallel eval with real processes (gloo on CPU): ``torchrun --nproc_per_node=2`` against one
process, a rank killed mid-run then a rerun, and more ranks than prompts.

Each launch starts two or three interpreters that import torch and transformers: the equality
check (about 20 s here) runs in the default suite, the other two are ``slow``; the in-process
tests of the same logic are ``test_eval_dataparallel.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_eval_dataparallel import read, without_times
from test_eval_records import _prompts

from specdec.bench.shards import rank_path

ROOT = Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
TINY = ["model=tiny", "method=sps", "max_new_tokens=6", "progress=false", "hydra.mode=RUN"]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "WANDB_MODE": "offline", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **extra}


def _launch(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run ``cmd`` from the repository root; its wall time and stdout (it must succeed)."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-4000:]
    return wall, proc.stdout


def _torchrun(n: int, args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """``torchrun --standalone --nproc_per_node=n -m specdec.eval args``: wall time, stdout."""
    return _launch([*TORCHRUN, f"--nproc_per_node={n}", "-m", "specdec.eval", *args], env)


def test_two_processes_record_what_one_process_records(tmp_path):
    """The issue's target: token ids and every metric but times equal, one summary. Both runs
    are launched alike (one thread per process, as torchrun sets it)."""
    # float64: a thread count that changes reduction order cannot flip a near-tie greedy argmax
    common = ["model=tiny", "model.dtype=float64", "method=sps", "max_new_tokens=6",
              "benchmark=tiny", "limit=4",
              "progress=false", "hydra.mode=RUN", f"paths.cache_dir={tmp_path / 'cache'}"]
    one, two = tmp_path / "one", tmp_path / "two"
    wall_1, _ = _launch([sys.executable, "-m", "specdec.eval", *common, f"hydra.run.dir={one}"],
                        _env())
    wall_2, stdout = _torchrun(2, [*common, f"hydra.run.dir={two}"], _env())
    print(f"\ntiny pair, 4 prompts, wall time of the launch: one process {wall_1:.1f} s, "
          f"torchrun --nproc_per_node=2 {wall_2:.1f} s (start-up dominated)")
    assert stdout.count("overall") == 1  # rank 0 alone prints the table
    ones, twos = read(one / "records" / "tiny.jsonl"), read(two / "records" / "tiny.jsonl")
    assert [r["prompt_id"] for r in twos] == [f"tiny-{i}" for i in range(4)]
    assert [without_times(r) for r in twos] == [without_times(r) for r in ones]
    assert not (two / "records" / "ranks").exists()
    single = json.loads((one / "summary.json").read_text())
    summary = json.loads((two / "summary.json").read_text())
    assert summary["complete"] is True and summary["world_size"] == 2
    assert summary["config_hash"] == single["config_hash"]
    for key in ("new_tokens", "target_forwards", "prompts", "block_efficiency"):
        assert summary["overall"][key] == single["overall"][key], key


@pytest.mark.slow
def test_a_rank_killed_mid_run_the_other_finishes_and_a_rerun_completes(tmp_path):
    """Two processes launched by hand (a launcher that does not stop the survivors), rank 1
    SIGKILLed after two records: rank 0 finishes its share and fails at the dataset's meeting
    within rank_timeout_s, naming the fix; a torchrun rerun records only the missing prompts."""
    ids = _prompts(tmp_path / "data", 40)
    out = tmp_path / "run"
    args = [*TINY, "benchmark=alpaca", "limit=40", "max_new_tokens=16", "warmup=0",
            "rank_timeout_s=20", f"hydra.run.dir={out}", f"paths.cache_dir={tmp_path / 'cache'}"]
    from torch.distributed.elastic.utils.distributed import get_free_port

    env = _env(SPECDEC_DATA_DIR=str(tmp_path / "data"), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(get_free_port()), WORLD_SIZE="2")
    cmd = [sys.executable, "-m", "specdec.eval", *args]
    procs = [subprocess.Popen(cmd, cwd=ROOT, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for r in (0, 1)]
    # 1. Kill rank 1 once it has recorded two prompts (of its 20).
    rank1 = rank_path(out / "records", "alpaca", 1)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and procs[1].poll() is None:
        if rank1.exists() and rank1.read_text().count("\n") >= 2:
            break
        time.sleep(0.01)
    os.kill(procs[1].pid, signal.SIGKILL)
    procs[1].wait()
    killed_at = len(read(rank1))
    assert 2 <= killed_at < 20, killed_at
    # 2. Rank 0 finishes its 20 prompts, then fails at the meeting with the message.
    _, err = procs[0].communicate(timeout=300)
    assert procs[0].returncode != 0
    said = [ln for ln in err.splitlines() if "not every rank finished" in ln]
    print("\nrank 0 after rank 1 was killed:", said[-1][:600] if said else err[-2000:])
    assert "not every rank finished dataset alpaca" in err and "rerun the same command" in err
    rank0 = read(rank_path(out / "records", "alpaca", 0))
    assert [r["prompt_id"] for r in rank0] == ids[0::2]
    assert json.loads((out / "summary.json").read_text())["complete"] is False
    # 3. Rerun with torchrun: only rank 1's missing prompts run; nothing is recorded twice.
    _torchrun(2, args, {k: v for k, v in env.items() if k not in ("MASTER_PORT", "WORLD_SIZE")})
    merged = read(out / "records" / "alpaca.jsonl")
    assert [r["prompt_id"] for r in merged] == ids  # every prompt once, in prompt order
    kept = {r["prompt_id"]: r["total_s"] for r in rank0}
    assert all(r["total_s"] == kept[r["prompt_id"]] for r in merged if r["prompt_id"] in kept)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["overall"]["prompts"] == 40


@pytest.mark.slow
def test_more_processes_than_prompts_the_idle_rank_joins(tmp_path):
    out = tmp_path / "run"
    _torchrun(3, [*TINY, "benchmark=tiny", "limit=2", "cost_model=false",
                  f"hydra.run.dir={out}", f"paths.cache_dir={tmp_path / 'cache'}"], _env())
    assert [r["prompt_id"] for r in read(out / "records" / "tiny.jsonl")] == ["tiny-0", "tiny-1"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["world_size"] == 3
