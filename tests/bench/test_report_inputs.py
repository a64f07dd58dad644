"""What the report reads and how it names it: unreadable summaries are named and skipped
(``--strict`` fails), copies of a run count once, a baseline run pairs with itself and keeps its
plain label, ``leaderboard.csv`` says which pair, benchmark and code made a row with folders
relative to itself, one method keeps one colour in every plot, a sweep keeps its own files beside
its board; and the smaller things a user reads: the progress bar's τ, the logged cost table,
``per_category`` balanced on the report's categories.

Runs: the tiny pair on its tiny benchmark (``ar`` and ``sps``, one prompt each).
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from matplotlib.colors import to_rgba
from omegaconf import OmegaConf

import specdec.bench.run.runner as ev
from specdec.bench.pricing import CostTable
from specdec.bench.report import board as rp
from specdec.bench.report.plots import acceptance_curves, bars
from specdec.bench.run.leaderboard import PrintLeaderboard
from specdec.bench.run.progress import running
from specdec.data.prompts import MULTI_TURN, Prompt, first_per_category, report_category
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO

SHARED = REPO.parent / "shared" / "data"  # beside the clone, if there
SPEC_BENCH = SHARED / "spec_bench" / "question.jsonl"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    for name in ("ar", "sps"):
        ev.run(eval_cfg(root / name, [f"method={name}", "limit=1", "warmup=0", "progress=false"]))
    return {name: root / name for name in ("ar", "sps")}


def _edit(src: Path, dst: Path, edit) -> Path:
    """A copy of the run ``src`` whose summary passes through ``edit(summary)``."""
    shutil.copytree(src, dst)
    summary = json.loads((dst / "summary.json").read_text())
    edit(summary)
    (dst / "summary.json").write_text(json.dumps(summary))
    return dst


def test_an_unreadable_summary_is_named_skipped_and_fails_strict(runs, tmp_path, capsys):
    broken = tmp_path / "broken"
    shutil.copytree(runs["sps"], broken)
    (broken / "summary.json").write_text('{"method": "sps", "datas')  # cut short
    empty = _edit(runs["sps"], tmp_path / "nodata", lambda s: s.pop("datasets"))
    board = rp.board([runs["ar"], runs["sps"], broken, empty], tmp_path / "out", plots=False)
    assert {r.run.path for r in board.rows} == {runs["sps"], runs["ar"]}  # the readable ones
    assert len(board.unreadable) == 2
    assert str(broken / "summary.json") in board.unreadable[0]
    assert str(empty / "summary.json") in board.unreadable[1]
    assert "no `method` and `datasets`" in board.unreadable[1]
    assert "## ✗ Unreadable summaries (skipped)" in board.text
    args = [str(runs["ar"]), str(broken), "--no-plots", "--out", str(tmp_path / "cli")]
    assert rp.main(args) == 0
    assert f"skipped (unreadable): {broken / 'summary.json'}" in capsys.readouterr().err
    assert rp.main([*args, "--strict"]) == 2


def test_a_copy_of_a_run_or_a_folder_given_twice_counts_once(runs, tmp_path):
    copy = tmp_path / "sps_copy"
    shutil.copytree(runs["sps"], copy)
    board = rp.board([runs["ar"], runs["sps"], copy, runs["sps"]], tmp_path / "out", plots=False)
    sps = [r for r in board.rows if r.run.method == "sps"]
    assert len(sps) == 1 and sps[0].members == [] and len(sps[0].runs) == 1
    assert sps[0].label == "sps"
    assert [line.split(":")[0] for line in board.copies] == [str(copy), str(runs["sps"])]
    assert "not a repeat" in board.copies[0] and "given twice" in board.copies[1]
    assert "## Copies of a run (counted once)" in board.text and "| runs |" not in board.text


def test_a_baseline_run_pairs_with_itself_and_keeps_its_plain_label(runs, tmp_path):
    def other(summary):  # another ar configuration, comparable to ar, twice as slow
        summary["config"]["model"]["draft_layers"] = 2
        summary["datasets"]["tiny"]["wall_s"] *= 2

    slow = _edit(runs["ar"], tmp_path / "ar_slow", other)
    _, rows = rp.report([runs["ar"], slow], tmp_path / "out", plots=False)
    labels = {r.run.path: r.label for r in rows}
    assert labels == {runs["ar"]: "ar", slow: "ar (ar_slow)"}
    assert all(r.baseline.path == r.run.path and r.speedup == 1.0 for r in rows)


def test_leaderboard_csv_names_pair_benchmark_code_and_relative_folders(runs, tmp_path):
    out = tmp_path / "board"
    rp.report([runs["ar"], runs["sps"]], out, plots=False)
    with (out / "leaderboard.csv").open() as f:
        rows = {r["method"]: r for r in csv.DictReader(f)}
    summary = json.loads((runs["sps"] / "summary.json").read_text())
    sps = rows["sps"]
    assert (sps["pair"], sps["benchmark"]) == ("tiny", "tiny")
    assert sps["git_commit"] == (summary["provenance"]["git_commit"] or "")
    assert not Path(sps["run_dirs"]).is_absolute() and not Path(sps["baseline_dir"]).is_absolute()
    assert (out / sps["run_dirs"]).resolve() == runs["sps"].resolve()
    assert (out / sps["baseline_dir"]).resolve() == runs["ar"].resolve()
    assert "modeled_speedup" not in sps  # only the two named numbers
    assert {"modeled_speedup_vs_ar", "self_modeled_speedup"} <= set(sps)


def test_one_method_keeps_one_colour_in_every_plot(runs, tmp_path):
    _, rows = rp.report([runs["ar"], runs["sps"]], tmp_path, plots=False)
    bar_ax = bars(rows, lambda r: r.metrics.get("block_efficiency"), "τ", "τ").axes[0]
    bar_colour = {c.get_label(): c.patches[0].get_facecolor() for c in bar_ax.containers}
    (curve,) = acceptance_curves(rows).axes[0].get_lines()  # ar drafts nothing: no curve
    assert curve.get_label() == "sps"
    assert to_rgba(curve.get_color()) == bar_colour["sps"] != bar_colour["ar"]


def test_a_sweep_keeps_its_own_files_beside_its_board(runs, tmp_path, capsys):
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    (sweep_dir / "multirun.yaml").write_text("a: 1\n")
    (sweep_dir / "optimization_results.yaml").write_text("best_value: 2.0\n")
    callback = PrintLeaderboard(plots=False)
    callback.dirs += [runs["ar"], runs["sps"]]
    callback.methods += ["ar", "sps"]
    callback.on_multirun_end(
        OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep_dir)}}, "logger": {"report": None}})
    )
    (board,) = (runs["ar"].parent / "leaderboard").iterdir()
    assert (board / "multirun.yaml").read_text() == "a: 1\n"
    assert (board / "optimization_results.yaml").read_text() == "best_value: 2.0\n"


def test_the_progress_bar_says_tau_and_the_cost_table_logs_short():
    recs = [{"new_tokens": 6, "decode_s": 0.5, "target_forwards": 4}]
    assert running(recs) == {"tok/s": "12.0", "τ": "1.50"}
    table = CostTable(times={"target": {1: 0.0123456789012, 2: 0.02}}, slopes={}, ref_context=0)
    assert table.describe() == "target: n=1 12.3, n=2 20"


def test_per_category_balances_the_reports_categories():
    mt = [
        Prompt(f"mt{i}", "specbench", cat, ("a", "b"))
        for i, cat in enumerate(
            [
                "writing",
                "roleplay",
                "reasoning",
                "math",
                "coding",
                "extraction",
                "stem",
                "humanities",
            ]
        )
    ]
    single = [
        Prompt(f"{cat}{i}", "specbench", cat, ("a",))
        for cat in ("translation", "qa")
        for i in range(3)
    ]
    chosen = first_per_category([*mt, *single], 1)  # MT-bench's 8 raw categories fold into one
    assert [p.id for p in chosen] == ["mt0", "translation0", "qa0"]
    assert [report_category(p) for p in chosen] == [MULTI_TURN, "translation", "qa"]
    assert len(first_per_category([*mt, *single], 3)) == 9


@pytest.mark.skipif(not SPEC_BENCH.is_file(), reason="no shared/data/spec_bench beside the clone")
def test_readme_counts_of_per_category_are_what_spec_bench_runs():
    from specdec.data.prompts import load_prompts

    readme = (REPO / "docs" / "evaluation.md").read_text()
    assert "per_category=3` (18 prompts" in readme and "`per_category=1`: 6 prompts" in readme
    prompts = load_prompts(SPEC_BENCH, "specbench")
    for n, total in ((1, 6), (3, 18)):
        chosen = first_per_category(prompts, n)
        counts = {
            c: [report_category(p) for p in chosen].count(c) for c in map(report_category, chosen)
        }
        assert len(chosen) == total and set(counts.values()) == {n}, counts
