"""The eval run in-process on the tiny pair: records, summaries, resume, cost model (loggers:
``test_eval_loggers.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import specdec.bench.run.calibration as calibration
import specdec.bench.run.runner as ev
from specdec.bench.costfit import log_rows
from specdec.bench.pricing import CostTable
from specdec.bench.run import dataset_run
from specdec.bench.run.e2e import end_to_end
from specdec.lm import CachedLM
from specdec.metrics import GenerationStats, summarize
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO
from specdec.testing.run_files import run_records as _records


@pytest.fixture(scope="module")
def sps_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sps")
    return out, ev.run(eval_cfg(out, ["method=sps"]))


def test_records_hold_one_line_per_prompt_with_counts_and_times(sps_run):
    out, summary = sps_run
    recs = _records(out)
    assert [r["prompt_id"] for r in recs] == ["tiny-0", "tiny-1"]
    for r in recs:
        assert {
            "dataset",
            "category",
            "method",
            "seed",
            "new_tokens",
            "target_forwards",
            "draft_forwards",
            "accepted_per_step",
            "wall_s",
            "prefill_s",
            "total_s",
            "text",
            "config_hash",
        } <= set(r)
        assert r["method"] == "sps" and 0 < r["new_tokens"] <= 6
        assert r["wall_s"] == r["decode_s"] and r["total_s"] >= r["wall_s"]
        assert len(r["accepted_per_step"]) == r["target_forwards"]
    assert summary["datasets"]["tiny"] == {
        **summarize([GenerationStats.from_record(r) for r in recs]),
        **{
            k: summary["datasets"]["tiny"][k]
            for k in (
                "prompt_ids_hash",
                "prompt_file_sha256",
                "max_new_tokens",
                "chat_template",
                "template",
                "modeled_s",
                "forward_profile",
                "ar_modeled_s",
                "self_modeled_speedup",
            )
        },
        **end_to_end(recs),
    }  # prefill split, total_s and e2e tokens/s: sums over the records
    assert summary["datasets"]["tiny"]["total_s"] == pytest.approx(sum(r["total_s"] for r in recs))
    table = CostTable.from_dict(summary["cost_table"])  # fitted on the records' forward logs
    assert summary["datasets"]["tiny"]["modeled_s"] == pytest.approx(
        sum(table(log_rows(r["forward_log"])) for r in recs)
    )


def test_summary_carries_the_comparability_fingerprint(sps_run):
    out, summary = sps_run
    from specdec.models.tiny import tiny_pair

    assert summary["lossless"] is True and summary["method"] == "sps"
    assert summary["model"] == tiny_pair().describe()
    assert summary["sampling"] == {"temperature": 0.0, "top_k": 0, "top_p": 1.0}
    assert {"cpu", "torch_threads", "device"} <= set(summary["machine"])
    assert {"python", "torch", "transformers"} <= set(summary["software"])
    assert summary["datasets"]["tiny"]["max_new_tokens"] == 6
    assert summary["overall"]["prompts"] == 2 and summary["cost_model"] is True
    assert json.loads((out / "summary.json").read_text())["config_hash"] == summary["config_hash"]
    assert "tiny" in json.loads((out / "summary" / "tiny.json").read_text())["datasets"]


def test_rerun_resumes_without_generating_again(sps_run, monkeypatch):
    out, summary = sps_run

    def fail(*args, **kwargs):
        raise AssertionError("a recorded prompt was generated again")

    monkeypatch.setattr(dataset_run, "run_prompt", fail)
    again = ev.run(eval_cfg(out, ["method=sps", "warmup=0"]))
    assert len(_records(out)) == 2
    assert again["datasets"]["tiny"]["new_tokens"] == summary["datasets"]["tiny"]["new_tokens"]


def test_retrained_draft_at_the_same_config_records_afresh(tmp_path, monkeypatch):
    import specdec.models.tiny as tiny

    old = ev.run(eval_cfg(tmp_path, ["method=sps", "limit=1"]))
    first = _records(tmp_path)
    build = tiny.tiny_pair

    def retrained(**kwargs):  # the same config, other draft weights (as after a retrain)
        pair = build(**kwargs)
        with torch.no_grad():
            for p in pair.draft.parameters():
                p.mul_(1.01)
        return pair

    monkeypatch.setattr(tiny, "tiny_pair", retrained)
    second = ev.run(eval_cfg(tmp_path, ["method=sps", "limit=1"]))
    recs = _records(tmp_path)
    assert [r["prompt_id"] for r in recs] == ["tiny-0", "tiny-0"]  # generated again, old kept
    assert recs[1]["config_hash"] == second["config_hash"] != first[0]["config_hash"]
    assert second["learned_weights"]["draft"] != old["learned_weights"]["draft"]


def test_resume_false_records_afresh_and_limit_extends(tmp_path):
    ev.run(eval_cfg(tmp_path, ["method=ar", "limit=1"]))
    ev.run(eval_cfg(tmp_path, ["method=ar", "limit=2"]))  # same hash: adds tiny-1 only
    assert [r["prompt_id"] for r in _records(tmp_path)] == ["tiny-0", "tiny-1"]
    ev.run(eval_cfg(tmp_path, ["method=ar", "limit=2", "resume=false"]))
    assert [r["prompt_id"] for r in _records(tmp_path)] == ["tiny-0", "tiny-1"]


def test_cost_model_is_fitted_on_the_runs_own_forwards_not_a_bad_calibration(tmp_path, monkeypatch):
    calls = []

    def calibrate(target, draft, *, max_new=8, repeats=5):
        calls.append((target, draft))
        # a calibration taken in a slow phase (the audit's case): 0.5 s per forward
        slow = {1: 0.5, 2: 0.5, 64: 0.5}
        return CostTable(times={"target": slow, "draft": slow}, ref_context=8)

    monkeypatch.setattr(calibration, "calibrate", calibrate)
    summary = ev.run(eval_cfg(tmp_path, ["method=sps", "cost_model=true", "max_new_tokens=32"]))
    assert len(calls) == 1
    target, draft = calls[0]
    assert isinstance(target, CachedLM) and target.role == "target"
    assert isinstance(draft, CachedLM) and draft.role == "draft"
    recs = _records(tmp_path)
    logs = [log_rows(r["forward_log"]) for r in recs]
    # 1 target forward per step + the draft's forwards; prefill excluded like wall_s
    for r, log in zip(recs, logs, strict=True):
        assert sum(f.role == "target" for f in log) == r["target_forwards"]
        assert sum(f.role == "draft" for f in log) == r["draft_forwards"]
    # priced by what the forwards took in this run (tiny models: ~ms), not by the 0.5 s table
    measured = sum(f.seconds for log in logs for f in log)
    assert summary["datasets"]["tiny"]["modeled_s"] == pytest.approx(measured, rel=0.5)
    assert summary["calibration"]["times"]["target"] == {"1": 0.5, "2": 0.5, "64": 0.5}
    fitted, fit = CostTable.from_dict(summary["cost_table"]), summary["cost_fit"]
    assert fit["fitted"]["target"] and fit["fitted"]["draft"]  # sizes the run made >= 5 times
    for role in ("target", "draft"):
        assert all(fitted.times[role][int(n)] < 0.05 for n in fit["fitted"][role])
        # never made: the calibration's value, rescaled to the run's speed (the slow phase)
        scale = fit["calibration_scale"][role]
        assert 64 in fit["calibrated"][role] and scale < 0.1
        assert fitted.times[role][64] == pytest.approx(0.5 * scale)


def test_default_run_is_priced_by_a_real_calibration(sps_run):
    _, summary = sps_run  # cost_model=true is the default
    metrics = summary["datasets"]["tiny"]
    assert 0 < metrics["modeled_s"] < 10 * metrics["wall_s"]
    table = CostTable.from_dict(summary["cost_table"])  # fitted on the run, calibration fallback
    assert set(table.times) == {"target", "draft"} and {1, 8} <= set(table.times["draft"])
    assert all(v > 0 for v in table.times["target"].values())
    # the records' forward logs, priced by that table, give the run's modeled_s back
    logs = [log_rows(r["forward_log"]) for r in _records(sps_run[0])]
    assert sum(table(log) for log in logs) == pytest.approx(metrics["modeled_s"], rel=1e-9)
    # and so do their forward profiles, unless a forward's price was clamped at 0 (a negative
    # context slope fitted under load, far from the reference context: a profile sums contexts,
    # so it cannot clamp forward by forward)
    profile = metrics["forward_profile"]
    assert set(profile) == {"target", "draft"}
    assert sum(c for c, _ in profile["target"].values()) == metrics["target_forwards"]
    clamped = any(
        table.base(f.role, f.new_tokens)
        + table.slopes.get(f.role, 0.0) * (f.context - table.ref_context)
        < 0
        for log in logs
        for f in log
    )
    if not clamped:
        assert table.price(profile) == pytest.approx(metrics["modeled_s"], rel=1e-9)


def test_cost_model_false_skips_the_calibration(tmp_path, monkeypatch):
    monkeypatch.setattr(
        calibration,
        "calibrate",
        lambda *a, **k: pytest.fail("calibrated although cost_model=false"),
    )
    summary = ev.run(eval_cfg(tmp_path, ["method=sps", "cost_model=false", "limit=1"]))
    assert summary["cost_model"] is False and "modeled_s" not in summary["datasets"]["tiny"]
    assert summary["cost_table"] is None and "cost_fit" not in summary


def _prompt_file(data_dir: Path, turns: list[str], name: str = "alpaca") -> None:
    rows = [
        {"id": f"p{i}", "category": "c", "turns": [t], "meta": {"answer": str(i)}}
        for i, t in enumerate(turns)
    ]
    (data_dir / name).mkdir(parents=True, exist_ok=True)
    (data_dir / name / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_an_edited_prompt_file_records_afresh(tmp_path, monkeypatch):
    """Same ids, other text (same size and modification time): the old answers do not resume."""
    import os

    monkeypatch.setenv("SPECDEC_DATA_DIR", str(tmp_path / "data"))
    seen = []
    real = dataset_run.run_prompt
    monkeypatch.setattr(
        dataset_run, "run_prompt", lambda p, *a, **k: seen.append(p.turns) or real(p, *a, **k)
    )
    overrides = ["method=ar", "benchmark=alpaca", "limit=1", "warmup=0", "cost_model=false"]
    _prompt_file(tmp_path / "data", ["Name a colour."])
    first = ev.run(eval_cfg(tmp_path / "run", overrides))
    path = tmp_path / "data" / "alpaca" / "test.jsonl"
    stat = path.stat()
    _prompt_file(tmp_path / "data", ["Name a flower."])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = ev.run(eval_cfg(tmp_path / "run", overrides))
    assert seen == [("Name a colour.",), ("Name a flower.",)]
    assert second["config_hash"] != first["config_hash"]
    assert second["prompt_files"]["alpaca"] != first["prompt_files"]["alpaca"]
    assert len(_records(tmp_path / "run", "alpaca")) == 2


def test_a_corrupt_record_line_stops_or_is_skipped_and_rerun(tmp_path):
    ev.run(eval_cfg(tmp_path, ["method=ar", "cost_model=false"]))
    path = tmp_path / "records" / "tiny.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("{not json\n" + lines[1] + "\n")
    with pytest.raises(ValueError, match=f"record file {path}, line 1: not valid JSON"):
        ev.run(eval_cfg(tmp_path, ["method=ar", "cost_model=false"]))
    ev.run(eval_cfg(tmp_path, ["method=ar", "cost_model=false", "on_bad_record=skip"]))
    assert [r["prompt_id"] for r in _records(tmp_path)] == ["tiny-1", "tiny-0"]


def test_quality_turned_on_while_resuming_scores_every_prompt(tmp_path, monkeypatch):
    """``quality`` is in the config hash: no mean over the subset scored after resuming."""
    monkeypatch.setenv("SPECDEC_DATA_DIR", str(tmp_path / "data"))
    _prompt_file(tmp_path / "data", ["What is 0 + 0?", "What is 1 + 0?"], name="gsm8k")
    base = ["method=ar", "benchmark=gsm8k", "warmup=0", "cost_model=false"]
    ev.run(eval_cfg(tmp_path, [*base, "limit=1"]))
    summary = ev.run(eval_cfg(tmp_path, [*base, "limit=2", "quality=true"]))
    current = [r for r in _records(tmp_path, "gsm8k") if r["config_hash"] == summary["config_hash"]]
    assert [r["prompt_id"] for r in current] == ["p0", "p1"]
    assert all("quality_gsm8k_accuracy" in r for r in current)
    assert (
        summary["datasets"]["gsm8k"]["quality_gsm8k_accuracy"]
        == sum(r["quality_gsm8k_accuracy"] for r in current) / 2
    )


def test_summary_records_its_provenance(sps_run):
    import datetime
    import re

    _, summary = sps_run
    prov = summary["provenance"]
    assert prov["schema_version"] == 2
    assert datetime.datetime.fromisoformat(prov["created"]).tzinfo is not None
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: git_commit is None by design")
    assert re.fullmatch(r"[0-9a-f]{40}", prov["git_commit"]) and isinstance(prov["git_dirty"], bool)
