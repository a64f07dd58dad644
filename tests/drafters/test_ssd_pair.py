"""SSD / SAGUARO (``specdec.drafters.ssd``) on the tiny fp64 pair and through the eval: greedy = AR,
one output per seed whatever the worker's timing, the worker's forwards on their lane (one per
depth), a CLI run whose counters reach records, summary and report, and bad settings named with
their fix. The exact tests on tables are in ``test_ssd.py``.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest

from specdec.bench.report.board import report
from specdec.bench.run.runner import run
from specdec.drafters import EmptyDrafter
from specdec.drafters import ssd as ssd_mod
from specdec.drafters.policies import Fixed
from specdec.drafters.ssd import SsdDrafter
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import Tokenwise


def _ssd(draft_model, gamma: int, sampling: Sampling, mode: str = "thread", **kw) -> SsdDrafter:
    return SsdDrafter(CachedLM(draft_model, role="draft"), Fixed(gamma), mode=mode, **kw)


def _generate(pair, drafter, sampling, seed, text="Hello there", n=40):
    return generate(
        pair.tokenizer.encode(text),
        CachedLM(pair.target),
        drafter,
        Tokenwise(),
        sampling=sampling,
        coins=TorchCoins(seed),
        max_new_tokens=n,
    )


@pytest.mark.parametrize("self_draft", [False, True], ids=["tiny-draft", "target-as-draft"])
@pytest.mark.parametrize("saguaro_c", [1.0, 0.3])
def test_greedy_ssd_emits_ar_tokens_on_the_tiny_fp64_pair(tiny64, self_draft, saguaro_c):
    sampling = Sampling(temperature=0.0)
    draft = tiny64.target if self_draft else tiny64.draft
    for text in ("Hello there", "The quick brown fox", "1 2 3"):
        ar = _generate(tiny64, EmptyDrafter(), sampling, 0, text)
        out = _generate(tiny64, _ssd(draft, 4, sampling, saguaro_c=saguaro_c), sampling, 0, text)
        assert out.tokens == ar.tokens, text
        c = out.stats.counters
        assert c.get("hits", 0) + c.get("misses", 0) >= out.stats.target_forwards - 2
        if self_draft:  # the target as its own draft at T=0: the bonus is the draft's top-1
            assert "misses" not in c and c["hits"] >= out.stats.target_forwards - 2


def _slow(rng: random.Random):
    """``speculate`` delayed by a random 0-6 ms before it drafts (a different timing per run)."""
    real = ssd_mod.speculate

    def delayed(*args):
        time.sleep(rng.uniform(0.0, 0.006))
        return real(*args)

    return delayed


@pytest.mark.parametrize("self_draft", [False, True], ids=["tiny-draft", "target-as-draft"])
def test_same_seed_same_output_whatever_the_worker_timing(tiny64, self_draft, monkeypatch):
    sampling = Sampling(temperature=1.0)
    draft = tiny64.target if self_draft else tiny64.draft
    kw = {"saguaro_c": 0.5, "budget": 4}
    runs = [
        _generate(tiny64, _ssd(draft, 3, sampling, "inline", **kw), sampling, 5),
        _generate(tiny64, _ssd(draft, 3, sampling, **kw), sampling, 5),
    ]
    for timing_seed in (1, 2):
        with monkeypatch.context() as patch:
            patch.setattr(ssd_mod, "speculate", _slow(random.Random(timing_seed)))
            runs.append(_generate(tiny64, _ssd(draft, 3, sampling, **kw), sampling, 5))
    first = runs[0]
    for other in runs[1:]:
        assert other.tokens == first.tokens
        assert other.stats.counters == first.stats.counters
        assert other.stats.accepted_per_step == first.stats.accepted_per_step
        assert other.stats.drafted_per_step == first.stats.drafted_per_step
    # the cached path ran (the target as draft); a random tiny draft at T=1 mostly misses
    assert first.stats.counters.get("hits" if self_draft else "misses", 0) > 0
    other_seed = _generate(tiny64, _ssd(draft, 3, sampling, **kw), sampling, 6)
    assert other_seed.tokens != first.tokens  # the seed matters (40 tokens at T=1)


def test_the_speculation_runs_on_its_lane_one_forward_per_depth(tiny64):
    sampling = Sampling(temperature=1.0)
    out = _generate(tiny64, _ssd(tiny64.draft, 3, sampling, budget=4, backup="none"), sampling, 0)
    fw = out.stats.forwards
    drafts = [f for f in fw if f.role == "draft"]
    assert drafts and all(f.lane == "ssd" for f in drafts)  # backup=none: no main-lane drafting
    per_step: dict[int, int] = {}
    for f in drafts:
        per_step[f.step] = per_step.get(f.step, 0) + 1
    # reconcile (≤ 1) + glue (≤ 1) + one forward per chain depth (γ = 3): never one per chain
    assert max(per_step.values()) <= 2 + 3
    assert max(f.new_tokens for f in drafts) > 1  # chains share their forwards


FAST = ["method=ssd", "limit=2", "max_new_tokens=12", "warmup=0", "progress=false"]


def test_ssd_run_reports_both_clocks_rollback_and_cache_hit_rate(compose, capsys):
    # a draft equal to the target (same seed and size) at T=0: the cached chains hit
    cfg = compose(
        "eval",
        [
            *FAST,
            "model.draft_seed=0",
            "model.draft_layers=2",
            "cost_model=true",
            "sampling.temperature=0.0",
            "drafter.saguaro_c=0.5",
        ],
    )
    summary = run(cfg)
    out = Path(cfg.paths.output_dir)
    recs = [json.loads(x) for x in (out / "records" / "tiny.jsonl").read_text().splitlines()]
    assert len(recs) == 2
    for r in recs:
        c = r["counters"]
        assert c["hits"] + c.get("misses", 0) > 0 and c["chains"] > 0
        assert "ssd" in r["forward_log"]["lanes"]
    total = summary["datasets"]["tiny"]
    c = total["counters"]
    assert total["rollback_rate"] == pytest.approx(c["rolled_back"] / c["draft_tokens"])
    assert total["hit_rate"] == pytest.approx(c["hits"] / (c["hits"] + c.get("misses", 0)))
    assert total["wall_s"] > 0 and total["modeled_s"] > 0
    printed = capsys.readouterr().out
    assert "hit rate" in printed and "modeled s" in printed and "wall s" in printed
    text, _ = report([out], out / "board", plots=False)
    assert f"{total['hit_rate']:.3f}" in text


def test_bad_settings_name_the_fix(tiny64):
    sampling = Sampling(temperature=1.0)
    for kw, msg in (
        ({"backup": "fast"}, "drafter.backup='fast'"),
        ({"saguaro_c": 0.0}, "drafter.saguaro_c must be in"),
        ({"saguaro_top": 0}, "drafter.saguaro_top must be >= 1"),
        ({"budget": 0}, "drafter.budget must be >= 1"),
        ({"r": -1.0}, "drafter.r must be >= 0"),
        ({"cost_ratio": -0.1}, "drafter.cost_ratio must be >= 0"),
    ):
        with pytest.raises(ValueError, match=msg):
            _ssd(tiny64.draft, 3, sampling, "inline", **kw)
