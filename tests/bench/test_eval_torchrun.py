"""Data-parallel eval with real processes (gloo on CPU): ``torchrun --nproc_per_node=2`` against one
process over two datasets, a rank killed after dataset 1 then reruns (one with nothing new), the
torchrun agent killed, and more ranks than prompts.

Each launch starts two or three interpreters that import torch and transformers: the equality
check (about 20 s on an idle machine) runs in the default suite, the others are ``slow``; the
in-process tests of the same logic are ``test_eval_dataparallel.py`` and
``test_eval_dataparallel_datasets.py``.
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

from specdec.bench.run.shards import rank_path
from specdec.testing.paths import REPO
from specdec.testing.procs import gone
from specdec.testing.run_files import read_jsonl as read
from specdec.testing.run_files import without_times
from specdec.testing.run_files import write_alpaca_prompts as _prompts

ROOT = REPO
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
TINY = ["model=tiny", "method=sps", "max_new_tokens=6", "progress=false", "hydra.mode=RUN"]


def _env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "WANDB_MODE": "offline",
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        **extra,
    }


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


def test_two_processes_record_what_one_process_records_over_two_datasets(tmp_path):
    """The issue's target: token ids and every metric but times equal, one summary, every
    dataset of a two-dataset benchmark (old code: every rank died at dataset 2's first append,
    its folder removed by the merge of dataset 1). Both runs are launched alike (one thread per
    process, as torchrun sets it)."""
    # float64: a thread count that changes reduction order cannot flip a near-tie greedy argmax
    common = [
        "model=tiny",
        "model.placement.dtype=float64",
        "method=sps",
        "max_new_tokens=6",
        "benchmark=tiny2",
        "limit=2",
        "cost_model=false",
        "progress=false",
        "hydra.mode=RUN",
        f"paths.cache_dir={tmp_path / 'cache'}",
    ]
    one, two = tmp_path / "one", tmp_path / "two"
    wall_1, _ = _launch(
        [sys.executable, "-m", "specdec.eval", *common, f"hydra.run.dir={one}"], _env()
    )
    wall_2, stdout = _torchrun(2, [*common, f"hydra.run.dir={two}"], _env())
    print(
        f"\ntiny pair, 2 datasets of 2 prompts, wall time of the launch: one process "
        f"{wall_1:.1f} s, torchrun --nproc_per_node=2 {wall_2:.1f} s (start-up dominated)"
    )
    assert stdout.count("overall") == 1  # rank 0 alone prints the table
    for name, ids in (("tiny", ["tiny-0", "tiny-1"]), ("tiny_sb", ["sb-0", "sb-1"])):
        ones = read(one / "records" / f"{name}.jsonl")
        twos = read(two / "records" / f"{name}.jsonl")
        assert [r["prompt_id"] for r in twos] == ids
        assert [without_times(r) for r in twos] == [without_times(r) for r in ones]
    assert not (two / "records" / "ranks").exists()
    single = json.loads((one / "summary.json").read_text())
    summary = json.loads((two / "summary.json").read_text())
    assert summary["complete"] is True and summary["world_size"] == 2
    assert summary["datasets_done"] == ["tiny", "tiny_sb"]
    assert summary["config_hash"] == single["config_hash"]
    for key in ("new_tokens", "target_forwards", "prompts", "block_efficiency"):
        assert summary["overall"][key] == single["overall"][key], key
    assert summary["overall"]["prompts"] == 4


def _launch_by_hand(args: list[str], env: dict[str, str]) -> list[subprocess.Popen]:
    """Ranks 0 and 1 of ``python -m specdec.eval args`` started by hand (a launcher that does
    not stop the survivors when one dies)."""
    from torch.distributed.elastic.utils.distributed import get_free_port

    env = {
        **env,
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(get_free_port()),
        "WORLD_SIZE": "2",
    }
    cmd = [sys.executable, "-m", "specdec.eval", *args]
    return [
        subprocess.Popen(
            cmd,
            cwd=ROOT,
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in (0, 1)
    ]


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen, timeout_s: float = 300) -> None:
    """Until ``path`` holds ``n`` lines (or ``proc`` ended, or the time is up)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and path.read_text().count("\n") >= n:
            return
        time.sleep(0.01)


@pytest.mark.slow
def test_a_rank_killed_after_dataset_1_a_rerun_completes_and_a_second_adds_nothing(tmp_path):
    """Rank 1 SIGKILLed after two records of dataset 2 (tiny, then 20 alpaca-style prompts):
    rank 0 finishes its share and fails at the dataset's meeting within rank_timeout_s, naming
    the fix; a torchrun rerun records only the missing prompts; a rerun at another world size
    records nothing and writes the same complete summary. Old code: every rank died at its
    first append of dataset 2, and a rerun with nothing new summarised 0 prompts."""
    ids = _prompts(tmp_path / "data", 20)
    out = tmp_path / "run"
    args = [
        *TINY,
        "benchmark=tiny",
        "+dataset@benchmark.datasets.alpaca=alpaca",
        "benchmark.datasets.alpaca.limit=20",
        "max_new_tokens=16",
        "warmup=0",
        "cost_model=false",
        "rank_timeout_s=20",
        f"hydra.run.dir={out}",
        f"paths.cache_dir={tmp_path / 'cache'}",
    ]
    env = _env(SPECDEC_DATA_DIR=str(tmp_path / "data"))
    procs = _launch_by_hand(args, env)
    # 1. Kill rank 1 once it has recorded two prompts of dataset 2 (of its 10).
    rank1 = rank_path(out / "records", "alpaca", 1)
    _wait_for_lines(rank1, 2, procs[1])
    procs[1].kill()  # a no-op if it already ended
    _, err1 = procs[1].communicate()
    assert rank1.exists(), err1[-3000:]  # old code: FileNotFoundError at the first append
    killed_at = len(read(rank1))
    assert 2 <= killed_at < 10, killed_at
    # 2. Rank 0 finishes its 10 prompts, then fails at the meeting with the message.
    _, err = procs[0].communicate(timeout=300)
    assert procs[0].returncode != 0
    said = [ln for ln in err.splitlines() if "not every rank finished" in ln]
    print("\nrank 0 after rank 1 was killed:", said[-1][:600] if said else err[-2000:])
    assert "not every rank finished dataset alpaca" in err and "rerun the same command" in err
    rank0 = read(rank_path(out / "records", "alpaca", 0))
    assert [r["prompt_id"] for r in rank0] == ids[0::2]
    first = json.loads((out / "summary.json").read_text())
    assert first["complete"] is False and first["datasets_done"] == ["tiny"]
    assert first["overall"]["prompts"] == 4
    tiny = (out / "records" / "tiny.jsonl").read_bytes()
    # 3. Rerun with torchrun: only rank 1's missing prompts run; nothing is recorded twice.
    _torchrun(2, args, env)
    merged = read(out / "records" / "alpaca.jsonl")
    assert [r["prompt_id"] for r in merged] == ids  # every prompt once, in prompt order
    kept = {r["prompt_id"]: r["total_s"] for r in rank0}
    assert all(r["total_s"] == kept[r["prompt_id"]] for r in merged if r["prompt_id"] in kept)
    assert (out / "records" / "tiny.jsonl").read_bytes() == tiny
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["overall"]["prompts"] == 24
    assert not (out / "records" / "ranks").exists()
    # 4. Rerun at world size 3 with nothing new: the same records, the same counts.
    records = {n: (out / "records" / f"{n}.jsonl").read_bytes() for n in ("tiny", "alpaca")}
    _torchrun(3, args, env)
    assert {n: (out / "records" / f"{n}.jsonl").read_bytes() for n in records} == records
    again = json.loads((out / "summary.json").read_text())
    assert again["complete"] is True and again["world_size"] == 3
    assert again["datasets"]["tiny"]["prompts"] == 4 and again["overall"]["prompts"] == 24
    for key in ("new_tokens", "target_forwards", "block_efficiency"):
        assert again["overall"][key] == summary["overall"][key], key


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s child processes (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ranks_stop_when_the_torchrun_agent_is_killed(tmp_path):
    """SIGKILL of the torchrun agent mid-dataset: both ranks (each in a session of its own) stop
    within seconds and write no more records. Old code: they answered on, for hours on a real
    benchmark."""
    _prompts(tmp_path / "data", 80)  # minutes of work for the old code's ranks to write on
    out = tmp_path / "run"
    args = [
        *TINY,
        "benchmark=alpaca",
        "limit=80",
        "max_new_tokens=64",
        "warmup=0",
        "cost_model=false",
        f"hydra.run.dir={out}",
        f"paths.cache_dir={tmp_path / 'cache'}",
    ]
    agent = subprocess.Popen(
        [*TORCHRUN, "--nproc_per_node=2", "-m", "specdec.eval", *args],
        cwd=ROOT,
        env=_env(SPECDEC_DATA_DIR=str(tmp_path / "data")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    rank0 = rank_path(out / "records", "alpaca", 0)
    _wait_for_lines(rank0, 1, agent)
    ranks = _children(agent.pid)
    agent.kill()
    agent.wait()
    try:
        assert len(ranks) == 2, ranks
        deadline = time.monotonic() + 15
        while not all(map(gone, ranks)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(map(gone, ranks)), "a rank outlived the torchrun agent"
        files = [rank0, rank_path(out / "records", "alpaca", 1)]
        written = [p.read_bytes() if p.exists() else b"" for p in files]
        time.sleep(1)
        assert [p.read_bytes() if p.exists() else b"" for p in files] == written
        assert rank0.exists() and len(read(rank0)) < 40  # stopped mid-share, nothing merged
    finally:
        for pid in ranks:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_more_processes_than_prompts_the_idle_rank_joins(tmp_path):
    out = tmp_path / "run"
    _torchrun(
        3,
        [
            *TINY,
            "benchmark=tiny",
            "limit=2",
            "cost_model=false",
            f"hydra.run.dir={out}",
            f"paths.cache_dir={tmp_path / 'cache'}",
        ],
        _env(),
    )
    assert [r["prompt_id"] for r in read(out / "records" / "tiny.jsonl")] == ["tiny-0", "tiny-1"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] is True and summary["world_size"] == 3
