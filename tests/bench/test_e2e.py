"""End-to-end time beside decode time (``bench/run/e2e.py``) and the report's per-context section
(``bench/report/per_context.py``).

* the prefill split reads the target's prefill forwards only; ``end_to_end`` sums and divides,
  and leaves out what older records lack;
* an eval run (tiny pair, ``ar`` and ``specblock`` with the shipped tiny asset) records the split
  per prompt and ``total_s`` / ``e2e_tokens_per_s`` per dataset and overall; the leaderboard shows
  the e2e columns and the per-context table with the e2e speedup computed from the records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import specdec.bench.run.runner as ev
from specdec.bench.report import board as rp
from specdec.bench.report.per_context import bucket_of
from specdec.bench.run.e2e import end_to_end, prefill_split
from specdec.forwards import ForwardRecord
from specdec.testing.eval_cfg import eval_cfg
from specdec.testing.paths import REPO


def _fwd(seconds: float, step: int) -> ForwardRecord:
    return ForwardRecord("target", 4, 0, seconds, step=step)


def test_prefill_split_reads_the_targets_prefill_forwards_only():
    log = [_fwd(0.25, -1), _fwd(0.5, 0), _fwd(0.125, -1), _fwd(1.0, 3)]  # two turns' prefills
    assert prefill_split(log, 0.5) == {"prefill_target_s": 0.375, "prefill_draft_s": 0.125}
    assert prefill_split(log, 0.25)["prefill_draft_s"] == 0.0  # clock jitter: never negative


def test_end_to_end_sums_and_leaves_out_what_old_records_lack():
    recs = [
        {"new_tokens": 6, "total_s": 2.0, "prefill_target_s": 0.5, "prefill_draft_s": 0.25},
        {"new_tokens": 2, "total_s": 2.0, "prefill_target_s": 0.5, "prefill_draft_s": 0.0},
    ]
    assert end_to_end(recs) == {
        "prefill_target_s": 1.0,
        "prefill_draft_s": 0.25,
        "total_s": 4.0,
        "e2e_tokens_per_s": 2.0,
    }
    assert end_to_end([{"new_tokens": 3, "total_s": 1.5}]) == {
        "total_s": 1.5,
        "e2e_tokens_per_s": 2.0,
    }
    assert end_to_end([]) == {}
    assert [bucket_of(n) for n in (1, 511, 512, 2047, 2048)] == [
        "<512",
        "<512",
        "512-2k",
        "512-2k",
        ">2k",
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("e2e")
    asset = [
        "drafter.path=" + str(REPO / "specdec" / "assets" / "specblock" / "tiny"),
        "drafter.experiment=specblock_tiny",
    ]  # no Hydra choices in a composed config
    for method, extra in (("ar", []), ("specblock", asset)):
        ev.run(
            eval_cfg(root / method, [f"method={method}", "warmup=0", "max_new_tokens=4", *extra])
        )
    return {m: root / m for m in ("ar", "specblock")}


def _records(path: Path) -> list[dict]:
    return [json.loads(x) for x in (path / "records" / "tiny.jsonl").read_text().splitlines()]


def test_records_and_summaries_hold_the_prefill_split_and_end_to_end_speed(runs):
    for method, path in runs.items():
        recs = _records(path)
        for r in recs:
            assert r["prefill_target_s"] > 0 and r["prefill_draft_s"] >= 0
            assert r["prefill_target_s"] + r["prefill_draft_s"] == pytest.approx(r["prefill_s"])
            assert r["total_s"] >= r["prefill_s"] + r["wall_s"] - 1e-6
        if method == "specblock":  # its catch-up on the prompt is the drafter's prefill
            assert all(r["prefill_draft_s"] > 0 for r in recs)
        summary = json.loads((path / "summary.json").read_text())
        for metrics in (summary["datasets"]["tiny"], summary["overall"]):
            total = sum(r["total_s"] for r in recs)
            assert metrics["total_s"] == pytest.approx(total)
            assert metrics["e2e_tokens_per_s"] == pytest.approx(
                sum(r["new_tokens"] for r in recs) / total
            )
            assert metrics["prefill_draft_s"] == pytest.approx(
                sum(r["prefill_draft_s"] for r in recs)
            )


def test_leaderboard_shows_e2e_speed_and_the_per_context_table(runs, tmp_path):
    text, rows = rp.report([runs["ar"], runs["specblock"]], tmp_path, plots=False)
    row = next(r for r in rows if r.run.path == runs["specblock"])
    mine, base = _records(runs["specblock"]), _records(runs["ar"])

    def per_token(recs):
        return sum(r["total_s"] for r in recs) / sum(r["new_tokens"] for r in recs)

    assert row.e2e_speedup == pytest.approx(per_token(base) / per_token(mine))
    assert "| e2e tokens/s | e2e speedup |" in text.splitlines()[2]
    assert "## Per context length" in text and "### specblock" in text
    line = next(
        x
        for x in text.splitlines()
        if x.startswith("| <512 | 2 |") and f"{row.e2e_speedup:.2f}x" in x
    )
    assert f"{sum(r['prefill_draft_s'] for r in mine):.2f}" in line
