"""Data-parallel eval, in-process: sharding, the merge of rank files, resume across world sizes,
more ranks than prompts, and the ranks' records equal to one process's (``specdec.bench.run.ranks``,
``specdec.bench.run.shards``). The ranks of a run are simulated one after another in this process
(their meetings are no-ops here); ``test_eval_torchrun.py`` launches real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import specdec.bench.run.runner as ev
from specdec.bench.records import RecordFile
from specdec.bench.run.dataset_run import DatasetRun
from specdec.bench.run.ranks import Ranks
from specdec.bench.run.shards import merge, rank_files, rank_path, recorded_elsewhere
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO
from specdec.testing.ranks import InProcessRanks
from specdec.testing.run_files import read_jsonl as read
from specdec.testing.run_files import without_times


def run_ranks(
    out: Path, world: int, overrides: list[str], order: list[int] | None = None
) -> dict | None:
    """Run ranks ``order`` (default: the last rank first, rank 0 last) of a ``world``-rank eval."""
    summary = None
    for rank in order if order is not None else reversed(range(world)):
        summary = ev.run(eval_cfg(out, overrides), InProcessRanks(rank, world))
    return summary


# --- sharding -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("n", "world"), [(4, 2), (7, 3), (2, 3), (1, 1), (0, 2)])
def test_shards_are_disjoint_balanced_round_robin_and_cover_every_prompt(n, world):
    items = [f"p{i}" for i in range(n)]
    shards = [Ranks(r, world).shard(items) for r in range(world)]
    assert sorted(x for s in shards for x in s) == sorted(items)  # every prompt, once
    assert max(map(len, shards)) - min(map(len, shards)) <= 1
    assert shards[0] == items[::world]  # round robin by index: deterministic across reruns


def test_ranks_come_from_torchruns_environment(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    assert Ranks.from_env() == Ranks(0, 1, 0)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert Ranks.from_env() == Ranks(3, 4, 1) and not Ranks.from_env().main
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match="RANK=4 with WORLD_SIZE=4"):
        Ranks.from_env()
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        Ranks.from_env()


def test_each_rank_gets_its_own_gpu_and_a_pinned_gpu_is_refused():
    assert Ranks(1, 2, 1).device("cpu") == "cpu"
    assert Ranks(0, 1).device("cuda:1") == "cuda:1"  # one process: as configured
    with pytest.raises(ValueError, match="device=cuda:1 with 2 processes"):
        Ranks(1, 2, 1).device("cuda:1")
    if torch.cuda.device_count() < 8:
        with pytest.raises(ValueError, match="LOCAL_RANK=7 but this machine has"):
            Ranks(7, 8, 7).device("cuda")


# --- the merge ----------------------------------------------------------------------------------


def _write(path: Path, recs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _r(pid: str, h: str = "h", **extra) -> dict:
    return {"prompt_id": pid, "config_hash": h, **extra}


def test_merge_orders_by_prompt_keeps_other_configs_drops_duplicates_and_rank_files(tmp_path):
    d = tmp_path / "records"
    _write(d / "ds.jsonl", [_r("p3", "old"), _r("p1", src="merged")])
    _write(rank_path(d, "ds", 0), [_r("p2"), _r("p0"), _r("p9", "old")])
    _write(rank_path(d, "ds", 1), [_r("p1", src="rank1"), _r("p3")])
    _write(rank_path(d, "other", 0), [_r("x")])  # another dataset's file stays
    assert merge(d, "ds", "h", ["p0", "p1", "p2", "p3"], ranks=Ranks(0, 2))
    recs = read(d / "ds.jsonl")
    mine = [r for r in recs if r["config_hash"] == "h"]
    assert [r["prompt_id"] for r in mine] == ["p0", "p1", "p2", "p3"]
    assert mine[1]["src"] == "merged"  # a prompt in several files: kept once, the merged one's
    assert [r["prompt_id"] for r in recs if r["config_hash"] == "old"] == ["p3", "p9"]
    assert rank_files(d, "ds") == [] and rank_files(d, "other") == [rank_path(d, "other", 0)]
    assert RecordFile.open(d / "ds.jsonl", "h").done == {"p0", "p1", "p2", "p3"}


def test_merge_without_rank_files_leaves_a_one_process_file_byte_for_byte(tmp_path):
    d = tmp_path / "records"
    _write(d / "ds.jsonl", [_r("p1"), _r("p0")])
    before = (d / "ds.jsonl").read_bytes()
    assert not merge(d, "ds", "h", ["p0", "p1"], ranks=Ranks(0, 1))
    assert (d / "ds.jsonl").read_bytes() == before


def test_merge_with_resume_false_keeps_only_the_current_ranks_records(tmp_path):
    d = tmp_path / "records"
    _write(d / "ds.jsonl", [_r("p0", src="old run")])
    _write(rank_path(d, "ds", 0), [_r("p0", src="now")])
    _write(rank_path(d, "ds", 5), [_r("p1", src="old, world 6")])
    merge(d, "ds", "h", ["p0", "p1"], ranks=Ranks(0, 2), resume=False)
    assert [(r["prompt_id"], r["src"]) for r in read(d / "ds.jsonl")] == [("p0", "now")]


def test_recorded_elsewhere_reads_other_files_only_and_never_repairs_them(tmp_path):
    d = tmp_path / "records"
    _write(d / "ds.jsonl", [_r("p0"), _r("p5", "old")])
    _write(rank_path(d, "ds", 0), [_r("p1")])
    _write(rank_path(d, "ds", 1), [_r("p2")])
    with rank_path(d, "ds", 1).open("a") as f:
        f.write('{"prompt_id": "p3", "config_')  # rank 1 is writing this line right now
    before = rank_path(d, "ds", 1).read_bytes()
    assert recorded_elsewhere(d, "ds", "h", own=rank_path(d, "ds", 0)) == {"p0", "p2"}
    assert rank_path(d, "ds", 1).read_bytes() == before  # only its owner repairs a file


# --- the runner, ranks simulated in turn --------------------------------------------------------


def test_two_ranks_record_what_one_process_records_and_rank_0_writes_the_one_summary(tmp_path):
    overrides = ["method=sps", "limit=3"]  # 3 prompts: rank 0 answers two, rank 1 one
    single = ev.run(eval_cfg(tmp_path / "one", overrides), InProcessRanks(0, 1))
    out = tmp_path / "two"
    ev.run(eval_cfg(out, overrides), InProcessRanks(1, 2))
    assert [r["prompt_id"] for r in read(rank_path(out / "records", "tiny", 1))] == ["tiny-1"]
    assert not (out / "summary.json").exists() and not (out / "records" / "tiny.jsonl").exists()
    summary = ev.run(eval_cfg(out, overrides), InProcessRanks(0, 2))
    one, two = read(tmp_path / "one" / "records" / "tiny.jsonl"), read(out / "records/tiny.jsonl")
    assert [r["prompt_id"] for r in two] == ["tiny-0", "tiny-1", "tiny-2"]
    assert [without_times(r) for r in two] == [without_times(r) for r in one]
    assert not (out / "records" / "ranks").exists()  # merged: the files a single run leaves
    assert summary["config_hash"] == single["config_hash"] and summary["complete"] is True
    assert summary["world_size"] == 2 and "world_size" not in single
    assert summary["overall"]["prompts"] == 3 and summary["overall"]["new_tokens"] == sum(
        r["new_tokens"] for r in one
    )
    assert summary["overall"]["modeled_s"] > 0  # priced on every rank's forward logs
    assert json.loads((out / "summary.json").read_text())["progress"] == {
        "tiny": {"recorded": 3, "expected": 3}
    }


def test_more_ranks_than_prompts_the_idle_ranks_just_join(tmp_path):
    overrides = ["method=ar", "limit=2", "cost_model=false", "logger=csv"]
    summary = run_ranks(tmp_path, 3, overrides, order=[2, 1])
    assert summary is None  # ranks > 0 return rank 0's summary: none here, simulated
    assert rank_files(tmp_path / "records", "tiny") == [rank_path(tmp_path / "records", "tiny", 1)]
    assert not (tmp_path / "summary.json").exists()  # rank 2 had no prompt and wrote nothing
    assert not (tmp_path / "metrics.csv").exists()  # only rank 0 logs
    summary = run_ranks(tmp_path, 3, overrides, order=[0])
    assert [r["prompt_id"] for r in read(tmp_path / "records" / "tiny.jsonl")] == [
        "tiny-0",
        "tiny-1",
    ]
    assert summary["complete"] is True and summary["overall"]["prompts"] == 2
    assert (tmp_path / "metrics.csv").exists()  # rank 0's logger


def test_a_rerun_with_another_world_size_records_only_the_missing_prompts(tmp_path, monkeypatch):
    answered: list[str] = []
    generate = DatasetRun.generate

    def spy(self, prompt):
        answered.append(prompt.id)
        return generate(self, prompt)

    monkeypatch.setattr(DatasetRun, "generate", spy)
    overrides = ["method=sps", "limit=4", "cost_model=false", "warmup=0"]
    # 1. A 3-rank run whose rank 0 died before answering anything: ranks 1 and 2 answered
    #    tiny-1 and tiny-2 (the shards are [0, 3], [1], [2]).
    run_ranks(tmp_path, 3, overrides, order=[1, 2])
    assert sorted(answered) == ["tiny-1", "tiny-2"]
    # 2. Rerun with 2 ranks (shards [0, 2] and [1, 3]): only tiny-0 and tiny-3 are answered.
    answered.clear()
    summary = run_ranks(tmp_path, 2, overrides)
    assert sorted(answered) == ["tiny-0", "tiny-3"]
    ids = [r["prompt_id"] for r in read(tmp_path / "records" / "tiny.jsonl")]
    assert ids == ["tiny-0", "tiny-1", "tiny-2", "tiny-3"] and summary["overall"]["prompts"] == 4
    assert not (tmp_path / "records" / "ranks").exists()  # the world-3 files were merged too
    # 3. One process now has nothing left to do.
    answered.clear()
    ev.run(eval_cfg(tmp_path, overrides), InProcessRanks(0, 1))
    assert answered == []


def test_ranks_that_would_write_to_different_folders_are_refused(tmp_path):
    class ElsewhereRank0(InProcessRanks):
        def broadcast(self, obj: object) -> object:
            return str(tmp_path / "rank0")  # rank 0's folder (its ${now:...} said another time)

    with pytest.raises(ValueError, match="rank 1/2 has .*rank1, rank 0 has .*give every rank one"):
        ev.run(eval_cfg(tmp_path / "rank1", ["method=ar"]), ElsewhereRank0(1, 2))
    assert not (tmp_path / "rank1" / "records").exists()


# --- the meeting of real processes --------------------------------------------------------------

BARRIER = textwrap.dedent("""
    import os, sys, time
    from specdec.bench.run.ranks import Ranks
    ranks = Ranks.from_env()
    ranks.start("cpu", timeout_s=60)
    if ranks.rank == 1:
        time.sleep(30)  # hangs (or died): never reaches the barrier
        sys.exit(0)
    start = time.monotonic()
    try:
        ranks.barrier("dataset tiny", timeout_s=3)
    except RuntimeError as err:
        print(f"{time.monotonic() - start:.1f}", err, flush=True)
        os._exit(0)
    print("passed the barrier")
""")


def test_a_rank_that_never_arrives_fails_the_barrier_in_time_with_a_clear_message(tmp_path):
    """Two real gloo processes: rank 0 waits 3 s for rank 1, then fails naming the dataset."""
    env_base = {
        "MASTER_ADDR": "127.0.0.1",
        "WORLD_SIZE": "2",
        "PYTHONPATH": ".",
        "PATH": "/usr/bin:/bin",
    }
    from torch.distributed.elastic.utils.distributed import get_free_port

    env_base["MASTER_PORT"] = str(get_free_port())
    root = REPO
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", BARRIER],
            cwd=root,
            text=True,
            env={**env_base, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for r in (0, 1)
    ]
    start = time.monotonic()
    out, err = procs[0].communicate(timeout=120)
    procs[1].kill()
    procs[1].wait()
    assert procs[0].returncode == 0, err[-2000:]
    assert " " in out, err[-3000:]
    waited, message = out.split(" ", 1)
    assert 2.5 <= float(waited) < 30, out
    assert "rank 0/2: not every rank finished dataset tiny within rank_timeout_s=3" in message
    assert "rerun the same command" in message
    assert time.monotonic() - start < 100
