"""Data-parallel eval over several datasets, in-process: the ranks of a run are threads
of this process that meet at a ``threading.Barrier``, so rank 0 merges dataset 1 while rank 1
already answers dataset 2, as under ``torchrun``. Covered: a two-dataset run equal to one
process's, a rerun with nothing new (one summary with every prompt), a rank dead after dataset 1
and the rerun that completes it, and a summary whose prompt count disagrees with its records
(refused before writing). ``test_eval_torchrun.py`` launches real processes."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from unittest.mock import patch

import pytest

import specdec.bench.run.runner as ev
from specdec.bench.run import pair_cache
from specdec.bench.run.dataset_run import DatasetRun
from specdec.bench.run.ranks import Ranks
from specdec.bench.run.shards import merge, rank_files, rank_path, remove_ranks_dir
from specdec.bench.run.summary import write_summaries
from specdec.bench.run_summary import RunSummary
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.ranks import InProcessRanks
from specdec.testing.run_files import read_jsonl as read
from specdec.testing.run_files import without_times

TWO = ["benchmark=tiny2", "method=sps", "limit=3", "cost_model=false", "warmup=0"]
NAMES = ("tiny", "tiny_sb")


class ThreadRanks(InProcessRanks):
    """A rank of a run whose ranks are threads: meetings are a shared ``threading.Barrier``."""

    def __init__(self, rank: int, world: int, meet: threading.Barrier, box: list) -> None:
        super().__init__(rank, world)
        object.__setattr__(self, "meet", meet)
        object.__setattr__(self, "box", box)

    def barrier(self, what: str, timeout_s: float) -> None:
        try:
            self.meet.wait()
        except threading.BrokenBarrierError:
            raise RuntimeError(f"{self.tag}: not every rank finished {what}") from None

    def broadcast(self, obj: object) -> object:
        if self.main:
            self.box[:] = [obj]
        self.barrier("a broadcast", 0)
        theirs = self.box[0]
        self.barrier("a broadcast", 0)
        return theirs


def run_threads(out: Path, world: int, overrides: list[str]) -> list[object]:
    """Run every rank of a ``world``-rank eval at once, one thread each: what each returned
    (its summary, or the exception that ended it)."""
    meet, box = threading.Barrier(world, timeout=300), []
    cfgs = [eval_cfg(out, overrides) for _ in range(world)]  # Hydra composes in this thread
    for rank, cfg in enumerate(cfgs):
        cfg.paths.cache_dir = str(out / f"cache{rank}")  # no two threads fill one datasets cache
    results: list[object] = [None] * world

    def rank_main(rank: int) -> None:
        try:
            results[rank] = ev.run(cfgs[rank], ThreadRanks(rank, world, meet, box))
        except BaseException as err:  # noqa: BLE001 - handed to the test
            results[rank] = err
            meet.abort()  # the others fail at their next meeting instead of waiting

    # the tiny pair draws its weights under torch's one global generator: one build at a time
    # (the pair is built in bench.pair_cache, the drafter and verifier in the runner's modules)
    lock, build = threading.Lock(), ev.instantiate

    def one_at_a_time(*args, **kwargs):
        with lock:
            return build(*args, **kwargs)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in range(world)]
    with (
        patch.object(ev, "instantiate", one_at_a_time),
        patch.object(pair_cache, "instantiate", one_at_a_time),
    ):
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return results


def _ids(out: Path, name: str) -> list[str]:
    return [r["prompt_id"] for r in read(out / "records" / f"{name}.jsonl")]


def _check_complete(out: Path, summary: object) -> None:
    """Every prompt of both datasets recorded once, in order; the one summary says so."""
    assert isinstance(summary, dict), summary
    assert _ids(out, "tiny") == ["tiny-0", "tiny-1", "tiny-2"]
    assert _ids(out, "tiny_sb") == ["sb-0", "sb-1", "sb-2"]
    assert not (out / "records" / "ranks").exists()  # merged: the files a single run leaves
    on_disk = json.loads((out / "summary.json").read_text())
    for s in (summary, on_disk):
        assert s["complete"] is True and s["datasets_done"] == list(NAMES)
        assert s["overall"]["prompts"] == 6
        assert all(s["datasets"][n]["prompts"] == 3 for n in NAMES)
        assert s["progress"] == {n: {"recorded": 3, "expected": 3} for n in NAMES}


def test_two_ranks_finish_two_datasets_and_record_what_one_process_records(tmp_path):
    """Old code: rank 0 removed records/ranks/ after merging dataset 1, and every rank's first
    append of dataset 2 died with FileNotFoundError."""
    single = ev.run(eval_cfg(tmp_path / "one", TWO), InProcessRanks(0, 1))
    out = tmp_path / "two"
    results = run_threads(out, 2, TWO)
    _check_complete(out, results[0])
    assert results[1] == results[0]  # every rank returns rank 0's summary
    for name in NAMES:
        ones, twos = (
            read(tmp_path / "one" / "records" / f"{name}.jsonl"),
            read(out / "records" / f"{name}.jsonl"),
        )
        assert [without_times(r) for r in twos] == [without_times(r) for r in ones]
    assert results[0]["config_hash"] == single["config_hash"]


def test_a_rerun_with_nothing_new_summarises_every_record(tmp_path, monkeypatch):
    """Old code: the rerun's gather fell back to rank 0's own empty file, and wrote a summary of
    0 prompts with null metrics marked complete."""
    out = tmp_path / "run"
    _check_complete(out, run_threads(out, 2, TWO)[0])
    before = {n: (out / "records" / f"{n}.jsonl").read_bytes() for n in NAMES}
    answered: list[str] = []
    monkeypatch.setattr(DatasetRun, "generate", lambda self, p: answered.append(p.id))
    for world in (2, 3):
        _check_complete(out, run_threads(out, world, TWO)[0])
        assert answered == []
        assert {n: (out / "records" / f"{n}.jsonl").read_bytes() for n in NAMES} == before


def test_a_rank_dead_after_dataset_1_a_rerun_records_only_the_rest(tmp_path, monkeypatch):
    """Rank 1 dies after one record of dataset 2; rank 0 fails at the dataset's meeting. Reruns at
    world size 2 then 3 (nothing left for it) complete the run, every prompt recorded once."""
    out = tmp_path / "run"
    answered: list[tuple[int, str]] = []
    generate = DatasetRun.generate

    def dies(self, prompt):
        if self.ranks.rank == 1 and self.name == "tiny_sb" and self.rf.records:
            raise SystemExit("rank 1 killed")
        answered.append((self.ranks.rank, prompt.id))
        return generate(self, prompt)

    monkeypatch.setattr(DatasetRun, "generate", dies)
    results = run_threads(out, 2, [*TWO, "limit=4"])
    assert isinstance(results[1], SystemExit)
    assert isinstance(results[0], RuntimeError) and "dataset tiny_sb" in str(results[0])
    first = json.loads((out / "summary.json").read_text())
    assert first["complete"] is False and first["datasets_done"] == ["tiny"]
    assert first["datasets"]["tiny"]["prompts"] == 4
    assert (1, "sb-1") in answered and (1, "sb-3") not in answered
    monkeypatch.setattr(DatasetRun, "generate", generate)
    done = set(_ids(out, "tiny")) | {
        r["prompt_id"] for p in rank_files(out / "records", "tiny_sb") for r in read(p)
    }
    spy: list[str] = []
    monkeypatch.setattr(
        DatasetRun, "generate", lambda self, p: spy.append(p.id) or generate(self, p)
    )
    summary = run_threads(out, 2, [*TWO, "limit=4"])[0]
    assert sorted(spy) == sorted({"sb-0", "sb-1", "sb-2", "sb-3"} - done) == ["sb-3"]
    assert _ids(out, "tiny") == [f"tiny-{i}" for i in range(4)]
    assert _ids(out, "tiny_sb") == [f"sb-{i}" for i in range(4)]
    assert summary["complete"] is True and summary["overall"]["prompts"] == 8
    assert not (out / "records" / "ranks").exists()


def test_a_summary_whose_prompt_count_disagrees_with_its_records_is_not_written(tmp_path):
    summary = RunSummary("sps", {"tiny": {"prompts": 0}}, overall={"prompts": 0})
    with pytest.raises(RuntimeError, match="tiny: the summary counts 0 prompts, 3 are recorded"):
        write_summaries(tmp_path, summary, {"tiny": {"recorded": 3, "expected": 3}}, "tiny")
    summary = RunSummary("sps", {"tiny": {"prompts": 3}}, overall={"prompts": 2})
    with pytest.raises(RuntimeError, match="overall: the summary counts 2 prompts, 3 are in"):
        write_summaries(tmp_path, summary, {"tiny": {"recorded": 3, "expected": 3}})
    assert not (tmp_path / "summary.json").exists() and not (tmp_path / "summary").exists()


def test_merge_keeps_the_ranks_folder_and_drops_old_records_without_rank_files(tmp_path):
    """The folder stays for the next dataset's appends; ``resume=False`` with several ranks drops
    this config's earlier merged records even when no rank recorded anything."""
    d = tmp_path / "records"
    rank_path(d, "b", 1).parent.mkdir(parents=True)
    rank_path(d, "a", 0).write_text(json.dumps({"prompt_id": "p0", "config_hash": "h"}) + "\n")
    assert merge(d, "a", "h", ["p0"], ranks=Ranks(0, 2))
    assert (d / "ranks").is_dir() and rank_files(d, "a") == []
    old = [{"prompt_id": "p0", "config_hash": "h"}, {"prompt_id": "p0", "config_hash": "other"}]
    (d / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    assert not merge(d, "b", "h", ["p0"], ranks=Ranks(0, 2))  # resume: nothing to do
    assert merge(d, "b", "h", ["p0"], ranks=Ranks(0, 2), resume=False)
    assert read(d / "b.jsonl") == old[1:]
    remove_ranks_dir(d)
    assert not (d / "ranks").exists()
    remove_ranks_dir(d)  # none: nothing to do


def test_ranks_simulated_in_turn_still_merge_each_dataset(tmp_path):
    """Ranks run one after another (rank 1 first): the same files as the threads leave."""
    out = tmp_path / "run"
    ev.run(eval_cfg(out, TWO), InProcessRanks(1, 2))
    summary = ev.run(eval_cfg(out, TWO), InProcessRanks(0, 2))
    _check_complete(out, summary)
