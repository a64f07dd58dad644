"""The report: tiny ar + sps runs give a leaderboard with speedups; mismatched runs are refused."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import specdec.bench.run.runner as ev
from specdec.bench.report import board as rp
from specdec.testing.eval_cfg import eval_cfg


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Tiny runs: ar and sps (comparable), sps at temperature 1, ar on fewer prompts, and sps
    whose draft is a copy of the target (another draft, same target: comparable to ar)."""
    root = tmp_path_factory.mktemp("runs")
    specs = {
        "ar": ["method=ar"],
        "sps": ["method=sps"],
        "sps_t1": ["method=sps", "sampling.temperature=1.0"],
        "ar_short": ["method=ar", "limit=1"],
        "sps_same": ["method=sps", "model.draft_seed=0", "model.draft_layers=2"],
    }
    for name, overrides in specs.items():
        ev.run(eval_cfg(root / name, overrides))
    return {name: root / name for name in specs}


def _summary(path: Path) -> dict:
    return json.loads((path / "summary.json").read_text())


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "records" / "tiny.jsonl").read_text().splitlines()]


def test_leaderboard_has_speedup_vs_ar(runs, tmp_path):
    text, rows = rp.report([runs["ar"], runs["sps"]], tmp_path)
    assert "| speedup |" in text and "## Speedup vs `ar` (method × dataset)" in text
    by_method = {r.run.method: r for r in rows}
    ar_s = _summary(runs["ar"])["datasets"]["tiny"]["wall_s"]
    sps_s = _summary(runs["sps"])["datasets"]["tiny"]["wall_s"]
    assert by_method["ar"].speedup == 1.0
    assert by_method["sps"].speedup == pytest.approx(ar_s / sps_s)
    assert f"| {ar_s / sps_s:.2f}x |" in text
    assert not any(r.refused for r in rows) and "Refused" not in text
    assert (tmp_path / "leaderboard.md").read_text() == text
    for png in ("speedup.png", "block_efficiency.png", "acceptance.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_different_sampling_is_refused_with_the_reason(runs, tmp_path):
    text, rows = rp.report([runs["ar"], runs["sps_t1"]], tmp_path, plots=False)
    sps = next(r for r in rows if r.run.method == "sps")
    assert sps.speedup is None
    assert "sampling differs (temperature: 1.0 vs 0.0)" in sps.refused
    assert "## Refused comparisons" in text and "refused" in text


def test_different_prompts_are_refused(runs):
    rows = rp.build_rows(rp.load_runs([runs["ar_short"], runs["sps"]]))
    sps = next(r for r in rows if r.run.method == "sps")
    assert "prompts differs" in sps.refused and "prompt_ids_hash" in sps.refused


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (
            "machine",
            {"cpu": "Other CPU", "torch_threads": "64", "device": "cpu"},
            "machine differs",
        ),
        ("model", {"name": "other"}, "model pair differs"),
        ("software", {"torch": "0.0"}, "software differs"),
    ],
)
def test_other_machine_pair_or_software_is_refused(runs, tmp_path, key, value, reason):
    moved = tmp_path / "moved"
    shutil.copytree(runs["sps"], moved)
    summary = _summary(moved)
    summary[key] = value
    (moved / "summary.json").write_text(json.dumps(summary))
    rows = rp.build_rows(rp.load_runs([runs["ar"], moved]))
    assert reason in next(r for r in rows if r.run.method == "sps").refused


def test_a_rerun_kernel_probe_keeps_runs_comparable_but_another_kernel_does_not(runs, tmp_path):
    """The probe's timings change on every probe (a deleted cache file): only its choice counts."""
    moved = tmp_path / "moved"
    shutil.copytree(runs["sps"], moved)
    summary = _summary(moved)
    summary["model"] = {**summary["model"], "linear_kernel_probe": "stock 1.0 ms, packed 2.0 ms"}
    (moved / "summary.json").write_text(json.dumps(summary))
    rows = rp.build_rows(rp.load_runs([runs["ar"], moved]))
    assert next(r for r in rows if r.run.method == "sps").refused is None
    summary["model"]["linear_kernel"] = "other_kernel"
    (moved / "summary.json").write_text(json.dumps(summary))
    rows = rp.build_rows(rp.load_runs([runs["ar"], moved]))
    assert "model pair differs" in next(r for r in rows if r.run.method == "sps").refused


def test_another_draft_of_the_same_target_is_compared_and_labelled(runs, tmp_path):
    text, rows = rp.report([runs["ar"], runs["sps"], runs["sps_same"]], tmp_path, plots=False)
    same = next(r for r in rows if r.run.path == runs["sps_same"])
    assert same.refused is None and same.speedup is not None
    assert same.label == "sps (sps_same)" and "| sps |" in text  # the default folder: plain
    assert same.metrics["acceptance_rate"] == 1.0  # draft == target: every token accepted
    assert same.metrics["block_efficiency"] > 1.0


def test_no_baseline_run_is_said(runs):
    rows = rp.build_rows(rp.load_runs([runs["sps"]]))
    assert rows[0].refused == "no `ar` run of dataset tiny among the inputs"


def test_cli_finds_runs_below_a_folder_and_strict_fails_on_refusals(runs, tmp_path):
    parent = next(iter(runs.values())).parent
    cmd = [
        sys.executable,
        "-m",
        "specdec.report",
        str(runs["ar"]),
        str(runs["sps"]),
        "--out",
        str(tmp_path / "ok"),
        "--strict",
        "--no-plots",
    ]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "| sps | tiny |" in ok.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "specdec.report",
            str(parent),
            "--strict",
            "--no-plots",
            "--out",
            str(tmp_path / "bad"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "refused:" in bad.stderr and "sampling differs" in bad.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "specdec.report", str(tmp_path / "empty")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 1 and "no summary.json" in missing.stderr


def test_modeled_speedup_prices_both_runs_with_one_table_fitted_on_both_logs(runs, tmp_path):
    from specdec.bench.costfit import fit_cost_table, log_rows
    from specdec.bench.pricing import CostTable

    text, rows = rp.report([runs["ar"], runs["sps"]], tmp_path, plots=False)
    by_method = {r.run.method: r for r in rows}
    sps = _summary(runs["sps"])
    logs = {m: [log_rows(r["forward_log"]) for r in _records(runs[m])] for m in ("ar", "sps")}
    joint, fit = fit_cost_table(logs["ar"] + logs["sps"], CostTable.from_dict(sps["calibration"]))
    assert fit["fitted"]["target"]  # the target's sizes come from the two runs' own forwards
    expected = sum(map(joint, logs["ar"])) / sum(map(joint, logs["sps"]))
    assert by_method["sps"].modeled_speedup_vs_ar == pytest.approx(expected)
    assert by_method["ar"].modeled_speedup_vs_ar == pytest.approx(1.0)
    assert "| modeled speedup vs ar |" in text and f"| {expected:.2f}x |" in text
    # an ar run prices as target forwards only: one per new token
    assert set(_summary(runs["ar"])["datasets"]["tiny"]["forward_profile"]) == {"target"}


def test_runs_without_a_cost_table_get_no_modeled_speedup(runs, tmp_path):
    copy = tmp_path / "sps_nocost"
    shutil.copytree(runs["sps"], copy)
    summary = _summary(copy)
    summary["cost_table"] = None
    (copy / "summary.json").write_text(json.dumps(summary))
    text, rows = rp.report([runs["ar"], copy], tmp_path / "out", plots=False)
    by_method = {r.run.method: r for r in rows}
    assert by_method["sps"].modeled_speedup_vs_ar is None and by_method["sps"].speedup is not None
    assert by_method["ar"].modeled_speedup_vs_ar == pytest.approx(1.0)  # ar has its own table
    sps_line = next(line for line in text.splitlines() if line.startswith("| sps |"))
    assert " - | " in sps_line
