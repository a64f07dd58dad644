"""Report items of "trustworthy numbers": per-category tables, greedy equality with ar, repeats over
seeds as mean ± std, leaderboard.csv; and the runs' own modeled speedup vs AR-equivalent forwards.

Runs: the tiny pair on ``tests/fixtures/tiny_specbench.jsonl`` (translation ×2, qa, and a two-turn
writing item that counts as multi-turn), temperature 0.
"""

from __future__ import annotations

import csv
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import specdec.bench.run.runner as ev
from specdec.bench.costfit import record_modeled_s
from specdec.bench.pricing import CostTable, ar_profile, merge_profiles
from specdec.bench.report import board as rp
from specdec.bench.report.categories import MULTI_TURN, run_categories
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import FIXTURES

FIXTURE = FIXTURES / "tiny_specbench.jsonl"
SPECS = {
    "ar": ["method=ar"],
    "sps": ["method=sps"],
    "ar_s1": ["method=ar", "seed=1"],
    "sps_s1": ["method=sps", "seed=1"],
    "sps_same": ["method=sps", "model.draft_seed=0", "model.draft_layers=2"],  # draft=target
    "sps_t1": ["method=sps", "sampling.temperature=1.0"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    for name, overrides in SPECS.items():
        ev.run(
            eval_cfg(
                root / name,
                [
                    *overrides,
                    f"benchmark.datasets.tiny.path={FIXTURE}",
                    "limit=4",
                    "max_new_tokens=6",
                    "warmup=0",
                ],
            )
        )
    return {name: root / name for name in SPECS}


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in (path / "records" / "tiny.jsonl").read_text().splitlines()]


def _summary(path: Path) -> dict:
    return json.loads((path / "summary.json").read_text())


def _copy(src: Path, dst: Path, edit) -> Path:
    """A copy of a run whose records pass through ``edit(records)``."""
    shutil.copytree(src, dst)
    recs = edit(_records(dst))
    (dst / "records" / "tiny.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return dst


def test_records_keep_output_ids_and_prompt_lengths_per_turn(runs):
    from specdec.models.tiny import tiny_pair

    tok = tiny_pair().tokenizer
    for rec in _records(runs["sps"]):
        assert len(rec["output_ids"]) == len(rec["prompt_tokens"]) == rec["turns"]
        assert sum(map(len, rec["output_ids"])) == rec["new_tokens"]
        answers = rec.get("answers", [rec["text"]])
        assert [tok.decode(ids, skip_special_tokens=True) for ids in rec["output_ids"]] == answers
    assert [r["turns"] for r in _records(runs["sps"])] == [1, 1, 1, 2]


def test_ar_profile_is_the_ar_runs_own_profile_and_its_modeled_speedup_is_one(runs):
    recs = _records(runs["ar"])
    built = merge_profiles(
        ar_profile(r["prompt_tokens"], [len(t) for t in r["output_ids"]]) for r in recs
    )
    summary = _summary(runs["ar"])
    assert built == summary["datasets"]["tiny"]["forward_profile"]
    assert summary["overall"]["self_modeled_speedup"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one prompt length per turn"):
        ar_profile([5, 7], [3])


def test_a_runs_own_modeled_speedup_prices_ars_forwards_with_the_runs_table(runs, tmp_path):
    _, rows = rp.report([runs["ar"], runs["sps"], runs["sps_same"]], tmp_path, plots=False)
    for name in ("sps", "sps_same"):
        row = next(r for r in rows if r.run.path == runs[name])
        assert row.greedy is not None and row.greedy.fraction == 1.0  # same tokens as ar
        summary, recs = _summary(runs[name]), _records(runs[name])
        own, table = summary["datasets"]["tiny"], CostTable.from_dict(summary["cost_table"])
        ar_forwards = merge_profiles(
            ar_profile(r["prompt_tokens"], [len(t) for t in r["output_ids"]]) for r in recs
        )
        assert own["ar_modeled_s"] == pytest.approx(table.price(ar_forwards), rel=1e-9)
        assert own["modeled_s"] == pytest.approx(sum(record_modeled_s(r, table) for r in recs))
        assert own["self_modeled_speedup"] == pytest.approx(own["ar_modeled_s"] / own["modeled_s"])


def test_per_category_table_sums_the_categorys_records(runs, tmp_path):
    text, rows = rp.report([runs["ar"], runs["sps_same"]], tmp_path, plots=False)
    row = next(r for r in rows if r.run.path == runs["sps_same"])
    cats = run_categories(row)
    assert list(cats) == [MULTI_TURN, "qa", "translation"]
    mine, base = _records(runs["sps_same"]), {r["prompt_id"]: r for r in _records(runs["ar"])}
    table = CostTable.from_dict(_summary(runs["sps_same"])["cost_table"])
    for cat, ids in {MULTI_TURN: ["sb-3"], "qa": ["sb-1"], "translation": ["sb-0", "sb-2"]}.items():
        recs = [r for r in mine if r["prompt_id"] in ids]
        assert cats[cat]["prompts"] == len(ids)
        assert cats[cat]["block_efficiency"] == pytest.approx(
            sum(r["new_tokens"] for r in recs) / sum(r["target_forwards"] for r in recs)
        )
        assert cats[cat]["acceptance_rate"] == 1.0  # the draft is the target
        assert cats[cat]["speedup"] == pytest.approx(
            sum(base[i]["wall_s"] for i in ids) / sum(r["wall_s"] for r in recs)
        )
        priced = table.price(merge_profiles(base[i]["forward_profile"] for i in ids))
        assert cats[cat]["modeled_speedup_vs_ar"] == pytest.approx(
            priced / sum(record_modeled_s(r, table) for r in recs)
        )
    assert "## Per category" in text and "### sps on tiny" in text
    assert f"| translation | 2 | {cats['translation']['block_efficiency']:.2f} | 1.000 |" in text


def test_one_category_gets_no_table_and_no_baseline_no_speedups(runs, tmp_path):
    def one(recs):
        return [{**r, "category": "tiny", "turns": 1} for r in recs]

    flat = _copy(runs["sps"], tmp_path / "flat", one)
    text, rows = rp.report([runs["ar"], flat], tmp_path / "out", plots=False)
    assert run_categories(next(r for r in rows if r.run.path == flat)) == {}
    assert "### ar on tiny" in text and "### sps on tiny" not in text
    _, alone = rp.report([runs["sps"]], tmp_path / "alone", plots=False)
    cats = run_categories(alone[0])
    assert cats["qa"]["speedup"] is None and cats["qa"]["modeled_speedup_vs_ar"] is None


def test_a_greedy_mismatch_is_flagged_listed_and_fails_strict(runs, tmp_path):
    def plant(recs):
        recs[1]["output_ids"][0][-1] += 1  # sb-1's last token
        return recs

    bad = _copy(runs["sps"], tmp_path / "bad", plant)
    text, rows = rp.report([runs["ar"], bad], tmp_path / "out", plots=False)
    row = next(r for r in rows if r.run.path == bad)
    assert (row.greedy.equal, row.greedy.prompts, row.greedy.mismatched) == (3, 4, ("sb-1",))
    assert "**0.750 ✗**" in text and "## ✗ Greedy mismatches" in text
    assert "1 of 4 prompts differ" in text and "sb-1" in text and "fp64" in text
    cmd = [sys.executable, "-m", "specdec.report", str(runs["ar"])]
    flags = ["--no-plots", "--strict", "--out"]
    bad_cli = subprocess.run(
        [*cmd, str(bad), *flags, str(tmp_path / "c1")], capture_output=True, text=True, timeout=120
    )
    assert bad_cli.returncode == 2 and "greedy mismatch: sps on tiny" in bad_cli.stderr
    ok = subprocess.run(
        [*cmd, str(runs["sps"]), *flags, str(tmp_path / "c2")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr


def test_greedy_equality_needs_temperature_0_and_stored_ids(runs, tmp_path):
    rows = rp.build_rows(rp.load_runs([runs["ar"], runs["sps_t1"]]))
    assert next(r for r in rows if r.run.path == runs["sps_t1"]).greedy is None

    def strip(recs):
        return [{k: v for k, v in r.items() if k != "output_ids"} for r in recs]

    old = _copy(runs["sps"], tmp_path / "old", strip)
    text, rows = rp.report([runs["ar"], old], tmp_path / "out", plots=False)
    assert next(r for r in rows if r.run.path == old).greedy is None
    assert "greedy = ar" not in text  # no row compared: no column


def test_seed_repeats_merge_into_mean_and_std_of_paired_speedups(runs, tmp_path):
    paths = [runs[n] for n in ("ar", "ar_s1", "sps", "sps_s1", "sps_same")]
    text, rows = rp.report(paths, tmp_path, plots=False)
    sps = next(r for r in rows if r.run.path == runs["sps"])
    assert [r.run.path for r in sps.members] == [runs["sps"], runs["sps_s1"]]
    assert [m.baseline.path for m in sps.members] == [runs["ar"], runs["ar_s1"]]  # same seed
    wall = {n: _summary(runs[n])["datasets"]["tiny"]["wall_s"] for n in SPECS}
    paired = [wall["ar"] / wall["sps"], wall["ar_s1"] / wall["sps_s1"]]
    assert sps.speedup == pytest.approx(statistics.fmean(paired))
    assert sps.std["speedup"] == pytest.approx(statistics.stdev(paired))
    tps = [_summary(runs[n])["datasets"]["tiny"]["tokens_per_s"] for n in ("sps", "sps_s1")]
    assert sps.metrics["tokens_per_s"] == pytest.approx(statistics.fmean(tps))
    assert sps.greedy.prompts == 8 and sps.greedy.equal == 8
    same = next(r for r in rows if r.run.path == runs["sps_same"])
    assert same.members == [] and same.label == "sps (sps_same)"  # another config: its own row
    assert "| runs |" in text and f"{statistics.fmean(paired):.2f}x ± " in text
    assert len([r for r in rows if r.run.method == "ar"]) == 1


def test_leaderboard_csv_has_one_row_per_method_and_dataset(runs, tmp_path):
    pd = pytest.importorskip("pandas")
    paths = [runs[n] for n in ("ar", "ar_s1", "sps", "sps_s1", "sps_same")]
    _, rows = rp.report(paths, tmp_path, plots=False)
    with (tmp_path / "leaderboard.csv").open() as f:
        lines = list(csv.DictReader(f))
    frame = pd.read_csv(tmp_path / "leaderboard.csv")
    assert len(frame) == len(rows) == 3 and list(frame.columns) == list(lines[0])
    assert set(frame["method"]) == {"ar", "sps", "sps (sps_same)"}
    sps = frame[frame["method"] == "sps"].iloc[0]
    row = next(r for r in rows if r.label == "sps")
    assert sps["runs"] == 2 and sps["seeds"] == "0;1" and sps["dataset"] == "tiny"
    assert sps["speedup"] == pytest.approx(row.speedup)
    assert sps["speedup_std"] == pytest.approx(row.std["speedup"])
    assert sps["greedy_equal"] == 1.0 and sps["greedy_prompts"] == 8
    assert sps["self_modeled_speedup"] == pytest.approx(row.metrics["self_modeled_speedup"])
    assert sps["modeled_speedup_vs_ar"] == pytest.approx(row.modeled_speedup_vs_ar)
    same = frame[frame["method"] == "sps (sps_same)"].iloc[0]
    assert pd.isna(same["speedup_std"]) and same["acceptance_rate"] == 1.0
    ar = frame[frame["method"] == "ar"].iloc[0]
    assert pd.isna(ar["acceptance_rate"]) and pd.isna(ar["greedy_equal"])
