"""SSD / SAGUARO (``specdec.drafters.ssd``): exact at T > 0 through the real engine on every path
(cache hit, cache miss, the ``jit`` and ``none`` fallbacks, SAGUARO on and off, a stop id), greedy
= AR on the tiny fp64 pair, one output per seed whatever the worker's timing, the worker's
forwards on their lane, and a CLI run whose counters reach records, summary and report.

The exact tests run the worker inline (the enumeration harness needs a fixed draw order); every
chain of every speculation draws from its own forked stream, and the harness enumerates all of
them, used or not. Each case checks that the paths it enumerated took the branches it covers.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import pytest
import torch

from specdec.bench.report.board import report
from specdec.bench.run.runner import run
from specdec.drafters import EmptyDrafter, saguaro, ssd_cache
from specdec.drafters import ssd as ssd_mod
from specdec.drafters.policies import Fixed
from specdec.drafters.ssd import SsdDrafter
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.sampling import Sampling, TorchCoins, warp
from specdec.testing.enumeration import enumerate_outcomes, total_variation, truncate_at_stop
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Tokenwise

PROMPT, VOCAB, TARGET_SEED = [0, 1], 2, 7



def watch(drafter: SsdDrafter, seen: set[str]) -> SsdDrafter:
    """Record the branches the drafter takes: cache hit / miss, a proposed cached chain with a
    rejection in it, jit / root fallbacks, and a proposed q that SAGUARO reshaped."""
    propose, observe = drafter.propose, drafter.observe
    cached: list[bool] = []

    def watched_propose(ctx):
        cached[:] = [drafter._next is not None]
        before = drafter.counters()
        draft = propose(ctx)
        after = drafter.counters()
        seen.update(name for name in ("jit_steps", "root_steps")
                    if after.get(name, 0) > before.get(name, 0))
        # the proposed q' against the plain draft q of the same prefix
        if draft.num_drafted and not torch.allclose(_plain_q(drafter, ctx, draft), draft.q[:-1]):
            seen.add("reshaped")
        return draft

    def watched_observe(ctx, draft, verdict):
        before = drafter.counters()
        observe(ctx, draft, verdict)
        after = drafter.counters()
        seen.update(name for name in ("hits", "misses") if after.get(name, 0) > before.get(name, 0))
        if cached[0] and verdict.num_accepted < draft.num_drafted:
            seen.add("cached_reject")

    drafter.propose, drafter.observe = watched_propose, watched_observe
    return drafter


CASES = {  # id: (temperature, gamma, budget, saguaro_c, backup, stop_ids, max_new_tokens, kw)
    "jit": (1.0, 2, 1, 1.0, "jit", (), 4, {}),
    "jit-saguaro-budget2": (1.0, 1, 2, 0.4, "jit", (), 5, {}),
    "none-saguaro-T0.6": (0.6, 2, 1, 0.4, "none", (), 4, {}),
    "auto-stop-id": (1.0, 1, 1, 0.5, "auto", (1,), 5, {}),
    # a costly draft and a weak prior: the auto rule switches between jit and the root alone
    "auto-switches": (1.0, 2, 1, 0.5, "auto", (), 5, {"cost_ratio": 0.45, "prior_weight": 0.5}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_ssd_is_exact_at_positive_temperature(case):
    # Two drafts: the target's own table (q = p: many hits) and another one (rejections, misses).
    temperature, gamma, budget, c, backup, stop_ids, length, kw = CASES[case]
    sampling = Sampling(temperature=temperature)
    target = TableLM(VOCAB, TARGET_SEED)
    want = truncate_at_stop(ar_joint(target, PROMPT, length, sampling), set(stop_ids))
    seen: set[str] = set()
    for draft_seed in (TARGET_SEED, TARGET_SEED + 1):
        drafter = watch(SsdDrafter(TableLM(VOCAB, draft_seed, role="draft"), Fixed(gamma),
                                   budget=budget, saguaro_c=c, backup=backup,
                                   mode="inline", **kw), seen)

        def run_once(coins, drafter=drafter):
            out = generate(PROMPT, target, drafter, Tokenwise(), sampling=sampling, coins=coins,
                           max_new_tokens=length, stop_ids=stop_ids)
            return tuple(out.tokens)

        got = enumerate_outcomes(run_once)
        assert abs(sum(got.values()) - 1.0) < 1e-12
        assert total_variation(got, want) <= 1e-12, f"draft seed {draft_seed}"
    assert seen >= {"hits", "misses", "cached_reject"}, seen
    assert ("jit_steps" in seen) == (backup != "none")
    assert ("root_steps" in seen) == (backup == "none" or case == "auto-switches")
    assert ("reshaped" in seen) == (c < 1.0)


def _plain_q(drafter: SsdDrafter, ctx, draft) -> torch.Tensor:
    """``[K, V]`` the draft table's plain warped q along ``draft`` (no SAGUARO)."""
    lm = TableLM(VOCAB, drafter.lm.seed)
    ids = ctx.tokens.tolist() + draft.tokens[1:].tolist()
    return warp(torch.stack([lm.logits(tuple(ids[:i])) for i in range(len(ctx.tokens), len(ids))]),
                ctx.sampling)


def test_saguaro_for_sampling_only_is_caught():
    # The harness can fail: chains drawn from q' but verified against the plain q (SAGUARO not
    # applied on the verifier's side) must break the law.
    sampling, length = Sampling(temperature=1.0), 4
    target = TableLM(VOCAB, TARGET_SEED)
    want = ar_joint(target, PROMPT, length, sampling)
    drafter = SsdDrafter(TableLM(VOCAB, TARGET_SEED + 1, role="draft"), Fixed(2),
                         budget=1, saguaro_c=0.4, backup="jit", mode="inline")
    propose = drafter.propose

    def mislabelled(ctx):
        draft = propose(ctx)
        if not draft.num_drafted:
            return draft
        q = torch.cat([_plain_q(drafter, ctx, draft), draft.q[-1:]])  # [K+1, V]
        return ssd_mod.Draft(draft.tokens, draft.parent, q)

    drafter.propose = mislabelled
    got = enumerate_outcomes(lambda coins: tuple(generate(
        PROMPT, target, drafter, Tokenwise(), sampling=sampling, coins=coins,
        max_new_tokens=length).tokens))
    assert total_variation(got, want) > 1e-3


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_cache_holds_the_planned_outcomes_and_their_best_candidates(temperature):
    # V = 6, draft [s_1, s_2]: outcome k gets the F_k best draft tokens at slot k (s_{k+1}
    # excluded), each with a chain of L_k tokens drawn after prefix + s_1..s_k + c
    sampling, vocab = Sampling(temperature=temperature), 6
    lm = TableLM(vocab, 3, role="draft")
    ids, s = [0, 1, 2], [4, 5]
    plan = ssd_cache.Plan(ids=ids, draft=s, fanout=[2, 0, 3], lengths=[2, 1, 1],
                          coins=TorchCoins(0))
    cache = ssd_cache.speculate(lm, plan, sampling, 1, 0.5)
    want = set()
    for k, count in ((0, 2), (2, 3)):
        logits = lm.logits(tuple(ids + s[:k]))
        ranked = [t for t in torch.argsort(-logits).tolist() if k == len(s) or t != s[k]]
        want |= {(k, t) for t in ranked[:count]}
    assert set(cache) == want
    for (k, c), chain in cache.items():
        assert int(chain.tokens[0]) == c and chain.num_drafted == plan.lengths[k]
        q = warp(lm.logits(tuple(ids + s[:k] + [c]))[None], sampling)
        assert torch.allclose(chain.q[0], saguaro.reshape(q, 1, 0.5)[0])
    if temperature == 0:  # greedy: each chain is the draft's argmax continuation
        assert all(int(ch.tokens[1]) == int(lm.logits(tuple(ids + s[:k] + [c])).argmax())
                   for (k, c), ch in cache.items())
    # one tree: reconcile, glue (s_1, s_2), then one forward per chain depth (2)
    assert [f.new_tokens for f in lm.forward_log][-3:] == [2, 5, 2]


def test_ssd_is_exact_greedy_on_tables():
    sampling, length = Sampling(temperature=0.0), 6
    for seed in range(8):
        target = TableLM(VOCAB, seed)
        drafter = SsdDrafter(TableLM(VOCAB, seed + 100, role="draft"), Fixed(3),
                             budget=2, saguaro_c=0.5, mode="inline")
        got = enumerate_outcomes(lambda coins, d=drafter, t=target: tuple(generate(
            PROMPT, t, d, Tokenwise(), sampling=sampling, coins=coins,
            max_new_tokens=length).tokens))
        assert got == pytest.approx(ar_joint(target, PROMPT, length, sampling), abs=1e-12)


def _ssd(draft_model, gamma: int, sampling: Sampling, mode: str = "thread", **kw) -> SsdDrafter:
    return SsdDrafter(CachedLM(draft_model, role="draft"), Fixed(gamma), mode=mode,
                      **kw)


def _generate(pair, drafter, sampling, seed, text="Hello there", n=40):
    return generate(pair.tokenizer.encode(text), CachedLM(pair.target), drafter, Tokenwise(),
                    sampling=sampling, coins=TorchCoins(seed), max_new_tokens=n)


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
    runs = [_generate(tiny64, _ssd(draft, 3, sampling, "inline", **kw), sampling, 5),
            _generate(tiny64, _ssd(draft, 3, sampling, **kw), sampling, 5)]
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
    out = _generate(tiny64, _ssd(tiny64.draft, 3, sampling, budget=4, backup="none"),
                    sampling, 0)
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
    cfg = compose("eval", [*FAST, "model.draft_seed=0", "model.draft_layers=2", "cost_model=true",
                           "sampling.temperature=0.0", "drafter.saguaro_c=0.5"])
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
    for kw, msg in (({"backup": "fast"}, "drafter.backup='fast'"),
                    ({"saguaro_c": 0.0}, "drafter.saguaro_c must be in"),
                    ({"saguaro_top": 0}, "drafter.saguaro_top must be >= 1"),
                    ({"budget": 0}, "drafter.budget must be >= 1"),
                    ({"r": -1.0}, "drafter.r must be >= 0"),
                    ({"cost_ratio": -0.1}, "drafter.cost_ratio must be >= 0")):
        with pytest.raises(ValueError, match=msg):
            _ssd(tiny64.draft, 3, sampling, "inline", **kw)
