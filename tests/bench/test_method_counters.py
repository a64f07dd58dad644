"""Method counters: a drafter's counts reach records, summaries, the report and
the CSV logger, through the real eval runner with a counting test double."""

from __future__ import annotations

import csv
import json

from specdec.bench.report.board import report
from specdec.bench.run.runner import run
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.metrics import GenerationStats, summarize
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.doubles import CountingDrafter
from specdec.verifiers import Tokenwise

COUNTING = "drafter._target_=specdec.testing.doubles.CountingDrafter"


def test_generate_stores_the_drafters_counters(tiny64):
    sampling = Sampling(temperature=1.0)
    drafter = CountingDrafter(CachedLM(tiny64.draft, role="draft"), Fixed(2))
    out = generate(
        [5, 6, 7],
        CachedLM(tiny64.target),
        drafter,
        Tokenwise(),
        sampling=sampling,
        coins=TorchCoins(1),
        max_new_tokens=12,
    )
    assert out.stats.counters["proposals"] == out.stats.target_forwards
    full = sum(
        d > 0 and a == d for d, a in zip(out.stats.drafted_per_step, out.stats.accepted_per_step)
    )
    assert out.stats.counters.get("full_accepts", 0) == full
    again = GenerationStats.from_record(json.loads(json.dumps(out.stats.to_record())))
    assert again.counters == out.stats.counters
    twice = summarize([out.stats, again])["counters"]
    assert twice == {k: 2 * v for k, v in sorted(out.stats.counters.items())}


def test_counters_flow_into_records_summary_report_and_csv(compose, tmp_path):
    cfg = compose(
        "eval",
        [
            "method=sps",
            COUNTING,
            "cost_model=false",
            "limit=2",
            "max_new_tokens=6",
            "warmup=0",
            "progress=false",
            "logger=csv",
        ],
    )
    summary = run(cfg)
    lines = (tmp_path / "records" / "tiny.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    assert len(records) == 2
    for r in records:
        assert r["counters"]["proposals"] == r["target_forwards"]
    total = summary["datasets"]["tiny"]["counters"]
    assert total["proposals"] == sum(r["target_forwards"] for r in records)
    assert summary["overall"]["counters"] == total
    text, _ = report([tmp_path], tmp_path / "board", plots=False)
    assert "## Method counters" in text and f"proposals={total['proposals']}" in text
    rows = list(csv.reader((tmp_path / "metrics.csv").open()))
    assert ["tiny", "counter_proposals", str(float(total["proposals"]))] in rows
