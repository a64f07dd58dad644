"""The background-work mechanism (``specdec.drafters.ahead``) and how PEARL's reach the harness:
errors surface in the main thread naming the step (and the prompt: no record is written), a
configuration that cannot overlap is refused or warned about, and the counters become the
rollback and hit rates of records, summaries, the printed table and the report."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
import torch

import specdec.drafters.ahead as ahead_mod
from specdec.bench.report.board import report
from specdec.bench.run.runner import run
from specdec.drafters.ahead import Ahead, BackgroundError, check_overlap
from specdec.drafters.model import ModelDrafter
from specdec.drafters.pearl import PearlDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.forwards import current_lane
from specdec.lm import CachedLM
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import Tokenwise

CPU = torch.device("cpu")
FAST = ["method=pearl", "limit=2", "max_new_tokens=12", "warmup=0", "progress=false"]


def test_a_job_runs_on_the_worker_thread_in_its_lane_and_inline_in_the_caller():
    for mode in ("thread", "inline"):
        worker: Ahead[tuple] = Ahead("w", mode=mode)
        worker.submit(3, lambda: (threading.current_thread().name, current_lane()))
        assert worker.busy
        name, where = worker.take()
        assert where == ("w", -1) and not worker.busy and worker.take() is None
        assert (name == threading.current_thread().name) == (mode == "inline")
        worker.close()


def test_a_failing_job_raises_in_the_caller_naming_lane_and_step():
    for mode in ("thread", "inline"):
        worker: Ahead[int] = Ahead("pearl", mode=mode)
        worker.submit(7, lambda: 1 // 0)
        with pytest.raises(
            BackgroundError, match="'pearl' of decoding step 7 failed: ZeroDivisionError"
        ) as info:
            worker.take()
        assert isinstance(info.value.__cause__, ZeroDivisionError)
        worker.submit(8, lambda: 2)  # the failure does not wedge the worker
        assert worker.take() == 2


def test_a_job_must_be_taken_before_the_next():
    worker: Ahead[int] = Ahead("w", mode="inline")
    worker.submit(0, lambda: 1)
    with pytest.raises(RuntimeError, match="job of step 0 was never taken"):
        worker.submit(1, lambda: 2)
    worker.discard()
    assert not worker.busy
    with pytest.raises(ValueError, match="drafter.mode='async'"):
        Ahead("w", mode="async")


def test_overlap_check_refuses_more_draft_threads_than_cores_and_warns_when_serial(
    monkeypatch, caplog
):
    monkeypatch.setattr(ahead_mod, "machine_cores", lambda: 2)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)  # the target's budget
    with pytest.raises(
        ValueError, match="model.placement.draft_threads=3 exceeds this machine's 2 cores"
    ):
        check_overlap(CPU, 3, mode="thread", name="pearl")
    with caplog.at_level(logging.WARNING, logger="specdec.drafters.ahead"):
        assert check_overlap(CPU, 1, mode="thread", name="pearl")  # 1 + 1 cores: fits
        assert not caplog.records
        assert check_overlap(CPU, None, mode="thread", name="pearl")  # inherits 1: fits
        assert not caplog.records
        assert not check_overlap(CPU, 2, mode="thread", name="pearl")  # nothing left
    assert len(caplog.records) == 1 and "serial in wall time" in caplog.text
    assert "model.placement.draft_threads=2" not in caplog.text and "threads=T" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="specdec.drafters.ahead"):
        assert not check_overlap(CPU, None, mode="inline", name="pearl")  # serial by choice
        assert check_overlap(torch.device("cuda", 1), None, mode="thread", name="pearl")
    assert not caplog.records
    # auto: a worker thread where the budgets fit, the job inline (and a warning) where not
    with caplog.at_level(logging.WARNING, logger="specdec.drafters.ahead"):
        assert Ahead("w", threads=1).mode == "thread" and not caplog.records
        assert Ahead("w", threads=2).mode == "inline"
        assert Ahead("w", threads=2, mode="thread").mode == "thread"  # forced: kept, warned
    auto, forced = (r.getMessage() for r in caplog.records)
    assert "the worker runs inline (drafter.mode=auto)" in auto
    assert "only adds contention (drafter.mode=thread)" in forced


def test_pearl_on_a_config_that_cannot_overlap(compose, monkeypatch, caplog):
    monkeypatch.setattr(ahead_mod, "machine_cores", lambda: 2)
    cfg = compose("eval", [*FAST, "model.placement.draft_threads=5"])
    # Hydra wraps
    with pytest.raises(Exception, match="model.placement.draft_threads=5 exceeds") as info:
        run(cfg)
    assert isinstance(info.value.__cause__ or info.value, ValueError)
    assert not list(Path(cfg.paths.output_dir).glob("records/*.jsonl"))  # before any record
    with caplog.at_level(logging.WARNING, logger="specdec.drafters.ahead"):
        PearlDrafter(_draft_lm(threads=2), Fixed(2))  # tests run the target on 1
    assert "serial in wall time" in caplog.text


def _draft_lm(threads=None):
    from specdec.models.tiny import tiny_pair

    return CachedLM(tiny_pair().draft, role="draft", threads=threads)


def test_a_failing_worker_surfaces_in_generate_with_its_step(tiny64, monkeypatch):
    real = ModelDrafter.propose

    def flaky(self, ctx):  # PEARL's main lane never drafts: this runs on the worker only
        if ctx.step == 2:
            raise OSError("draft device lost")
        return real(self, ctx)

    monkeypatch.setattr(ModelDrafter, "propose", flaky)
    sampling = Sampling(temperature=0.0)
    drafter = PearlDrafter(CachedLM(tiny64.draft, role="draft"), Fixed(2))
    with pytest.raises(BackgroundError, match="decoding step 2 failed: OSError: draft device"):
        generate(
            tiny64.tokenizer.encode("Hi"),
            CachedLM(tiny64.target),
            drafter,
            Tokenwise(),
            sampling=sampling,
            coins=TorchCoins(0),
            max_new_tokens=10,
        )


def test_a_failing_worker_names_the_prompt_and_no_record_is_written(compose, monkeypatch):
    real = ModelDrafter.propose
    failed_in: list[str] = []

    def flaky(self, ctx):
        if ctx.step == 1:
            failed_in.append(threading.current_thread().name)
            raise OSError("draft device lost")
        return real(self, ctx)

    monkeypatch.setattr(ModelDrafter, "propose", flaky)
    cfg = compose("eval", [*FAST, "cost_model=false", "drafter.mode=thread"])
    with pytest.raises(BackgroundError, match=r"step 1 failed: OSError.*prompt 'tiny-0'"):
        run(cfg)
    assert failed_in and failed_in[0].startswith("specdec-pearl")  # raised on the worker
    records = Path(cfg.paths.output_dir) / "records" / "tiny.jsonl"
    assert not records.exists() or records.read_text().strip() == ""


def test_pearl_run_reports_both_clocks_rollback_and_hit_rate(compose, capsys):
    # a draft equal to the target (same seed and size): blocks are kept, so both PEARL modes run
    cfg = compose("eval", [*FAST, "model.draft_seed=0", "model.draft_layers=2", "cost_model=true"])
    summary = run(cfg)
    out = Path(cfg.paths.output_dir)
    recs = [json.loads(x) for x in (out / "records" / "tiny.jsonl").read_text().splitlines()]
    assert len(recs) == 2
    for r in recs:
        c = r["counters"]
        assert c["pre_steps"] + c["post_steps"] == r["target_forwards"] and c["hits"] > 0
        assert "pearl" in r["forward_log"]["lanes"]
    total = summary["datasets"]["tiny"]
    c = total["counters"]
    assert total["rollback_rate"] == pytest.approx(c["rolled_back"] / c["draft_tokens"])
    assert total["hit_rate"] == pytest.approx(
        c.get("hits", 0) / (c.get("hits", 0) + c.get("misses", 0))
    )
    assert total["wall_s"] > 0 and total["modeled_s"] > 0  # both clocks
    printed = capsys.readouterr().out
    assert "hit rate" in printed and "modeled s" in printed and "wall s" in printed
    text, _ = report([out], out / "board", plots=False)
    header = next(line for line in text.splitlines() if line.startswith("| method"))
    assert "| rollback |" in header and "| hit rate |" in header
    assert f"{total['hit_rate']:.3f}" in text and "rolled-back blocks included" in text
