"""Resumable records: partial last lines, config hashes, and a run killed with SIGKILL mid-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from specdec.bench.records import RecordFile, iter_records
from specdec.metrics import GenerationStats
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO
from specdec.testing.run_files import write_alpaca_prompts as _prompts

ROOT = REPO


def _rec(pid: str, **extra) -> dict:
    return {
        "prompt_id": pid,
        "new_tokens": 2,
        "target_forwards": 1,
        "draft_forwards": 0,
        "drafted": 0,
        "accepted": 0,
        "accepted_per_step": [0],
        "drafted_per_step": [0],
        "prefill_s": 0.1,
        "decode_s": 0.2,
        "draft_s": 0.0,
        **extra,
    }


def test_partial_last_line_is_dropped_and_file_repaired(tmp_path):
    path = tmp_path / "records" / "d.jsonl"
    rf = RecordFile.open(path, "h1")
    rf.append(_rec("a"))
    rf.append(_rec("b"))
    with path.open("a") as f:
        f.write('{"prompt_id": "c", "new_tok')  # killed mid-write
    rf = RecordFile.open(path, "h1")
    assert rf.done == {"a", "b"}
    assert path.read_text().endswith("}\n") and len(path.read_text().splitlines()) == 2
    rf.append(_rec("c"))
    assert [json.loads(x)["prompt_id"] for x in path.read_text().splitlines()] == ["a", "b", "c"]


def test_whole_last_line_without_newline_is_kept(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({**_rec("a"), "config_hash": "h"}))
    rf = RecordFile.open(path, "h")
    assert rf.done == {"a"}
    rf.append(_rec("b"))
    assert len(path.read_text().splitlines()) == 2


def test_other_config_hashes_are_kept_but_not_counted(tmp_path):
    path = tmp_path / "records" / "d.jsonl"
    RecordFile.open(path, "old").append(_rec("a"))
    rf = RecordFile.open(path, "new")
    assert rf.done == set()
    rf.append(_rec("a"))
    assert RecordFile.open(path, "old").done == {"a"} and RecordFile.open(path, "new").done == {"a"}
    assert [(r["prompt_id"], r["config_hash"]) for r in iter_records(tmp_path)] == [
        ("a", "old"),
        ("a", "new"),
    ]
    fresh = RecordFile.open(path, "new", resume=False)
    assert fresh.done == set() and RecordFile.open(path, "old").done == {"a"}


def test_appending_a_recorded_prompt_twice_is_an_invariant_error(tmp_path):
    rf = RecordFile.open(tmp_path / "d.jsonl", "h")
    rf.append(_rec("a"))
    with pytest.raises(AssertionError, match="twice"):
        rf.append(_rec("a"))


def test_stats_round_trip_through_a_record():
    s = GenerationStats.from_record(_rec("a"))
    assert s.new_tokens == 2 and s.accepted_per_step == [0] and s.forwards == []


def test_sigkill_mid_run_then_rerun_records_every_prompt_exactly_once(tmp_path, monkeypatch):
    import specdec.bench.run.runner as ev

    ids = _prompts(tmp_path / "data", 8)
    monkeypatch.setenv("SPECDEC_DATA_DIR", str(tmp_path / "data"))
    overrides = ["benchmark=alpaca", "limit=8", "max_new_tokens=6", "warmup=0"]
    # no hydra.run.dir: the run directory must follow from the command alone for resume to work
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "method=sps",
        *overrides,
        "progress=false",
        f"paths.log_dir={tmp_path / 'logs'}",
        f"paths.cache_dir={tmp_path / 'cache'}",
    ]
    run_dir = tmp_path / "logs" / "eval" / "tiny" / "alpaca" / "sps" / "max_new_tokens=6"
    records = run_dir / "records" / "alpaca.jsonl"
    # 1. Start a subprocess run, wait until a few prompts are recorded, SIGKILL it.
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if records.exists() and records.read_text().count("\n") >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed: " + str(
        proc.stderr.read()[-2000:] if proc.stderr else ""
    )
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = [
        json.loads(line)["prompt_id"]
        for line in records.read_text().splitlines()
        if line.endswith("}")
    ]
    assert 2 <= len(first) < 8
    # 2. Rerun the same configuration (in-process here, to save a second interpreter start-up;
    #    the same config hash is what lets it resume) in the killed run's directory.
    summary = ev.run(eval_cfg(run_dir, ["method=sps", *overrides]))
    recorded = [json.loads(line)["prompt_id"] for line in records.read_text().splitlines()]
    assert sorted(recorded) == sorted(ids), "a prompt is missing or recorded twice"
    assert recorded[: len(first)] == first  # the killed run's records were kept, not redone
    assert summary["datasets"]["alpaca"]["prompts"] == 8


@pytest.mark.slow
def test_sigkill_then_rerun_from_the_cli(tmp_path):
    """The same, with the rerun as a second CLI process (two interpreter start-ups)."""
    ids = _prompts(tmp_path / "data", 8)
    env = {**os.environ, "SPECDEC_DATA_DIR": str(tmp_path / "data")}
    cmd = [
        sys.executable,
        "-m",
        "specdec.eval",
        "model=tiny",
        "method=sps",
        "benchmark=alpaca",
        "limit=8",
        "max_new_tokens=12",
        "warmup=0",
        "progress=false",
        f"paths.log_dir={tmp_path / 'l'}",
    ]
    records = tmp_path / "l/eval/tiny/alpaca/sps/max_new_tokens=12/records/alpaca.jsonl"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None and not (records.exists() and records.read_text().count("\n") >= 2):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    recorded = [json.loads(line)["prompt_id"] for line in records.read_text().splitlines()]
    assert sorted(recorded) == sorted(ids)


@pytest.mark.parametrize("bad", ['{"prompt_id": "b", "new_tok', "\xff\xfe", '["b"]'])
def test_a_corrupt_line_before_the_last_names_the_file_and_line(tmp_path, bad):
    path = tmp_path / "records" / "d.jsonl"
    rf = RecordFile.open(path, "h")
    rf.append(_rec("a"))
    with path.open("a", encoding="latin-1") as f:  # "\xff\xfe" becomes bytes that are not UTF-8
        f.write(bad + "\n")
    rf.append(_rec("c"))
    with pytest.raises(ValueError, match="on_bad_record=skip") as err:
        RecordFile.open(path, "h")
    assert f"record file {path}, line 2: " in str(err.value)
    with pytest.raises(ValueError, match=f"record file {path}, line 2: "):
        list(iter_records(tmp_path))


def test_on_bad_skip_drops_the_corrupt_line_with_a_warning(tmp_path, caplog):
    path = tmp_path / "d.jsonl"
    rf = RecordFile.open(path, "h")
    rf.append(_rec("a"))
    with path.open("a") as f:
        f.write('{"prompt_id": "b", "new_tok\n')
    rf.append(_rec("c"))
    with caplog.at_level("WARNING"):
        rf = RecordFile.open(path, "h", on_bad="skip")
    assert rf.done == {"a", "c"} and "line 2" in caplog.text and "dropped" in caplog.text
    assert [json.loads(x)["prompt_id"] for x in path.read_text().splitlines()] == ["a", "c"]
