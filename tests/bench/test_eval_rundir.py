"""The run directory's files: strict JSON, atomic summaries, completeness, one run per folder."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import specdec.bench.run.runner as ev
from specdec.bench.records import RecordFile
from specdec.bench.report import board as rp
from specdec.bench.run import dataset_run
from specdec.bench.rundir import RunLock
from specdec.testing.eval_cfg import eval_cfg


def _strict(text: str):
    """Parse JSON refusing the NaN / Infinity literals that Python's json writes by default."""
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} written into JSON"))


def test_summaries_and_records_are_strict_json_with_null_for_nan(tmp_path):
    summary = ev.run(eval_cfg(tmp_path, ["method=ar", "cost_model=false", "limit=1"]))
    assert math.isnan(summary["datasets"]["tiny"]["acceptance_rate"])  # AR drafts nothing: 0/0
    for path in (tmp_path / "summary.json", tmp_path / "summary" / "tiny.json"):
        written = _strict(path.read_text())
        assert written["datasets"]["tiny"]["acceptance_rate"] is None
        assert written["overall"]["rollback_rate"] is None
    rf = RecordFile.open(tmp_path / "records" / "tiny.jsonl", "h")
    rf.append({"prompt_id": "x", "quality_q": math.nan, "modeled_s": [math.inf, 1.0]})
    last = (tmp_path / "records" / "tiny.jsonl").read_text().splitlines()[-1]
    assert _strict(last)["quality_q"] is None and _strict(last)["modeled_s"] == [None, 1.0]
    text, rows = rp.report([tmp_path], tmp_path / "report", plots=False)  # None reads as "-"
    assert rows[0].metrics["acceptance_rate"] is None and "| - |" in text


def _three_datasets(data_dir: Path) -> None:
    for name in ("alpaca", "gsm8k", "humaneval"):  # benchmark=default
        (data_dir / name).mkdir(parents=True)
        row = {"id": f"{name}-0", "category": "c", "turns": ["Say hi."]}
        (data_dir / name / "test.jsonl").write_text(json.dumps(row) + "\n")


def test_a_stopped_run_is_marked_incomplete_and_strict_report_refuses_it(tmp_path, monkeypatch):
    _three_datasets(tmp_path / "data")
    monkeypatch.setenv("SPECDEC_DATA_DIR", str(tmp_path / "data"))
    overrides = ["method=ar", "benchmark=default", "limit=1", "cost_model=false", "warmup=0"]
    real = dataset_run.run_prompt

    def stop_at_humaneval(prompt, *args, **kwargs):  # the second of gsm8k, humaneval, alpaca
        if prompt.dataset == "humaneval":
            raise KeyboardInterrupt  # as if the run were stopped there
        return real(prompt, *args, **kwargs)

    monkeypatch.setattr(dataset_run, "run_prompt", stop_at_humaneval)
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        ev.run(eval_cfg(run_dir, overrides))
    summary = _strict((run_dir / "summary.json").read_text())
    assert summary["complete"] is False and summary["datasets_done"] == ["gsm8k"]
    assert summary["progress"] == {
        "gsm8k": {"recorded": 1, "expected": 1},
        "humaneval": {"recorded": 0, "expected": 1},
        "alpaca": {"recorded": 0, "expected": 1},
    }
    assert _strict((run_dir / "summary" / "gsm8k.json").read_text())["complete"] is True
    text, rows = rp.report([run_dir], tmp_path / "report", plots=False)
    assert "| ar | gsm8k | yes | 1 | no |" in text and "## Incomplete runs" in text
    assert "humaneval (0 of 1 prompts recorded), alpaca (0 of 1 prompts recorded)" in text
    args = [str(run_dir), "--no-plots", "--out", str(tmp_path / "report")]
    assert rp.main(args) == 0 and rp.main([*args, "--strict"]) == 2
    monkeypatch.setattr(dataset_run, "run_prompt", real)
    done = ev.run(eval_cfg(run_dir, overrides))  # the rerun resumes and completes
    assert done["complete"] is True and done["datasets_done"] == ["gsm8k", "humaneval", "alpaca"]
    assert rp.main([*args, "--strict"]) == 0


class _KilledMidWrite:
    """A file whose first write stores half the text, then the process is 'killed'."""

    def __init__(self, f):
        self.f = f

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def write(self, text: str):
        self.f.write(text[: len(text) // 2])
        self.f.flush()
        raise KeyboardInterrupt


def test_a_kill_while_writing_the_summary_leaves_the_previous_one(tmp_path, monkeypatch):
    ev.run(eval_cfg(tmp_path, ["method=ar", "cost_model=false", "limit=1"]))
    before = (tmp_path / "summary.json").read_text()
    real_open = Path.open

    def open_(self, mode="r", *args, **kwargs):
        f = real_open(self, mode, *args, **kwargs)
        return _KilledMidWrite(f) if "w" in mode and "summary.json" in self.name else f

    monkeypatch.setattr(Path, "open", open_)
    with pytest.raises(KeyboardInterrupt):
        ev.run(eval_cfg(tmp_path, ["method=ar", "cost_model=false", "limit=2"]))
    monkeypatch.undo()
    assert (tmp_path / "summary.json").read_text() == before  # whole, as it was
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_second_run_of_the_same_folder_fails_fast_naming_the_holder(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(ev, "instantiate", lambda *a, **k: pytest.fail("the second run loaded"))
    with RunLock(tmp_path):  # another run holds the folder (a second open file = another run)
        with pytest.raises(RuntimeError) as err:
            ev.run(eval_cfg(tmp_path, ["method=ar"]))
    assert f"run directory {tmp_path} is in use by another eval (pid {os.getpid()})" in str(
        err.value
    )
    monkeypatch.undo()
    with pytest.raises(ValueError):  # released on exit, also after an error
        with RunLock(tmp_path):
            raise ValueError
    with RunLock(tmp_path):
        pass
