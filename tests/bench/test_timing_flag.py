"""An eval run whose timing is unreliable says so everywhere and claims no speedup.

The audit case, reproduced on the tiny pair: a γ=2 ``sps`` run whose cost table prices the 1-token
target forward ~480x above the larger ones (72 ms against 0.15 ms on a loaded machine). The
table is injected (the run's real fit, that one price scaled), and the load readings are pinned
quiet, so the verdict depends on nothing this machine does.
"""

from __future__ import annotations

import csv
import json
import math

import pytest

import specdec.bench.report.rows as rows
import specdec.bench.run.summary as run_summary
import specdec.bench.timing as timing
import specdec.eval as entry
from specdec.bench.costfit import drop_peaks, fit_cost_table, reproduced_drops
from specdec.bench.report import board as rp
from specdec.bench.run.loggers import WandbLogger
from specdec.bench.run.paired import pair_run
from specdec.bench.run.summary import sweep_metric
from specdec.bench.run_summary import RunSummary
from specdec.bench.timing import TimingCheck
from specdec.testing.eval_cfg import eval_cfg


def _non_monotone_fit(logs, fallback=None, **kwargs):
    """The run's real fit with the target's 1-token price 480x (the audit's 72 vs 0.15 ms), its
    drops checked against the run's real calibration (whose halves never saw that price)."""
    table, report = fit_cost_table(logs, fallback, **kwargs)
    table.times["target"][1] *= 480
    peaks = drop_peaks(table.times["target"])
    report["monotone_violations"]["target"] = list(peaks)
    report["kernel_shape"]["target"] = reproduced_drops(
        table.times["target"], peaks, fallback.halves.get("target", []) if fallback else []
    )
    return table, report


@pytest.fixture
def quiet(monkeypatch):
    """Strict mode, and a machine whose load never exceeds the run's own threads."""
    monkeypatch.setenv(timing.ENV, "strict")
    monkeypatch.setattr(timing, "load_average", lambda: (0.0, 0.0, 0.0))


def test_the_gamma_2_case_is_flagged_and_claims_no_speedup(
    tmp_path, quiet, monkeypatch, capsys, caplog
):
    common = ["benchmark=tiny", "logger=csv", "warmup=0", "limit=1"]
    entry.evaluate(eval_cfg(tmp_path / "ar", ["method=ar", *common]))
    monkeypatch.setattr(run_summary, "fit_cost_table", _non_monotone_fit)
    value = entry.evaluate(
        eval_cfg(tmp_path / "sps", ["method=sps", "drafter.policy.gamma=2", *common])
    )
    # the sweep objective is not a number: Optuna fails the trial, W&B logs NaN
    assert math.isnan(value)
    summary = json.loads((tmp_path / "sps" / "summary.json").read_text())
    check = summary["timing"]
    assert check["reliable"] is False
    assert any("target forward time drops as tokens grow" in r for r in check["reasons"])
    fit = summary["cost_fits"]["tiny"]  # the raw drops, none of them the kernel's shape
    assert fit["monotone_violations"]["target"] and fit["kernel_shape"]["target"] == []
    assert len(summary["calibration"]["halves"]["target"]) == 2  # what they were checked against
    assert summary["overall"]["sweep_objective"] is None  # NaN in strict JSON
    assert "modeled_speedup_vs_ar" not in summary["overall"]
    assert summary["sweep_objective_source"].startswith("not a number: timing unreliable (")
    # stdout and the log say it
    printed = capsys.readouterr().out
    assert "timing: unreliable (" in printed
    assert any("timing: unreliable" in r.getMessage() for r in caplog.records)
    # the run's logger (CSV here, the same calls as W&B) gets the flag and the reasons
    with (tmp_path / "sps" / "metrics.csv").open() as f:
        logged = {r["metric"]: r["value"] for r in csv.DictReader(f) if r["dataset"] == "overall"}
    assert (
        float(logged["timing_reliable"]) == 0.0
        and "drops as tokens grow" in logged["timing_reasons"]
    )
    # the leaderboard: the flag, no speedup claimed, the reasons listed
    text, _ = rp.report([tmp_path / "ar", tmp_path / "sps"], tmp_path / "board", plots=False)
    sps = next(line for line in text.splitlines() if line.startswith("| sps | tiny |"))
    assert "**unreliable ✗**" in sps and "| unreliable |" in sps
    assert not any(c.strip().endswith("x") for c in sps.split("|"))  # no "5.24x" anywhere
    assert "## ✗ Unreliable timing (no speedup claimed)" in text
    with (tmp_path / "board" / "leaderboard.csv").open() as f:
        row = next(r for r in csv.DictReader(f) if r["method"] == "sps")
    assert row["timing"] == "unreliable" and "drops as tokens grow" in row["timing_reasons"]
    assert row["speedup"] == row["modeled_speedup_vs_ar"] == row["self_modeled_speedup"] == ""
    assert float(row["block_efficiency"]) > 0  # the rest of the row stays


@pytest.mark.parametrize(("mode", "kept"), [("strict", False), ("lenient", True)])
def test_pairing_an_unreliable_run_withholds_its_objective_unless_lenient(
    tmp_path, quiet, monkeypatch, mode, kept
):
    monkeypatch.setenv(timing.ENV, mode)
    check = TimingCheck(table=["tiny: target forward time drops as tokens grow"], cores=2)
    summary = RunSummary(
        "sps", {}, cost_model=True, overall={"self_modeled_speedup": 3.73}, timing=check
    )
    pair_run(summary, tmp_path, None)  # no `ar` run known: the run's own estimate
    assert summary.overall["timing_reliable"] is False
    assert summary.overall["timing_reasons"] == check.table
    assert check.load[-1][0] == "end"  # the end's load was read
    if kept:
        assert summary.overall["sweep_objective"] == 3.73
        assert summary.sweep_objective_source.startswith("self_modeled_speedup (")
    else:
        assert math.isnan(summary.overall["sweep_objective"])
        assert summary.sweep_objective_source == (
            "not a number: timing unreliable (tiny: target forward time drops as tokens grow)"
        )
        assert math.isnan(sweep_metric(summary.to_json(), "sweep_objective"))


def test_a_quiet_run_is_reliable_until_paired_with_a_run_calibrated_elsewhere(
    tmp_path, quiet, monkeypatch
):
    def steady(name, table, fit, calibration):  # this machine's real tables vary under load
        return []

    monkeypatch.setattr(run_summary, "_table_reasons", steady)
    entry.evaluate(eval_cfg(tmp_path / "ar", ["method=ar", "warmup=0", "limit=1"]))
    value = entry.evaluate(eval_cfg(tmp_path / "sps", ["method=sps", "warmup=0", "limit=1"]))
    path = tmp_path / "sps" / "summary.json"
    summary = json.loads(path.read_text())
    assert summary["timing"]["reliable"] is True and summary["timing"]["reasons"] == []
    assert [r[0] for r in summary["timing"]["load"]] == ["start", "end"]
    assert value == summary["overall"]["sweep_objective"] and not math.isnan(value)
    assert summary["overall"]["timing_reliable"] is True
    monkeypatch.setattr(rows, "table_reasons", lambda *a: [])  # the joint table: steady too
    _, board = rp.report([tmp_path / "ar", tmp_path / "sps"], tmp_path / "ok", plots=False)
    assert [(r.label, r.timing, r.modeled_speedup_vs_ar is not None) for r in board] == [
        ("ar", [], True),
        ("sps", [], True),
    ]
    # the same run, as if calibrated on a machine twice as slow as the `ar` run's
    theirs = json.loads((tmp_path / "ar" / "summary.json").read_text())["calibration"]
    summary["calibration"]["times"]["target"] = {
        n: 2 * t for n, t in theirs["times"]["target"].items()
    }
    path.write_text(json.dumps(summary))
    text, board = rp.report([tmp_path / "ar", tmp_path / "sps"], tmp_path / "off", plots=False)
    sps = next(r for r in board if r.label == "sps")
    assert sps.timing == [
        "this run's calibration is 2x the `ar` run's (median over 13 sizes; limit 1.5x)"
    ]
    assert sps.speedup is None and sps.modeled_speedup_vs_ar is None and sps.withheld


class FakeRun:
    """What ``WandbLogger`` uses of a W&B run: ``log`` and a ``summary`` mapping."""

    def __init__(self) -> None:
        self.logged: dict = {}
        self.summary: dict = {}

    def log(self, values: dict) -> None:
        self.logged.update(values)


def test_the_wandb_logger_gets_the_flag_and_its_reasons():
    logger = WandbLogger.__new__(WandbLogger)  # no W&B run started: a stand-in records the calls
    logger.run = FakeRun()
    logger.log_dataset(
        "overall",
        {
            "sweep_objective": math.nan,
            "timing_reliable": False,
            "timing_reasons": ["tiny: a", "load b"],
        },
    )
    assert logger.run.logged["eval/overall/timing_reliable"] == 0.0
    assert math.isnan(logger.run.logged["eval/overall/sweep_objective"])
    assert logger.run.summary["eval/overall/timing_reasons"] == "tiny: a; load b"
