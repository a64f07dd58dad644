"""PEARL (``specdec.drafters.pearl``): exact at T > 0 through the real engine, greedy = AR, the
same output whatever the worker's timing, and its worker's forwards priced on their own lane.

The exact tests run the worker inline (``mode="inline"``; the enumeration harness needs a fixed
draw order) and check, per case, that the paths they enumerate really took every branch of the
schedule: PRE steps, POST steps, kept and rolled-back blocks, and a POST draft with a rejection.
"""

from __future__ import annotations

import random
import time

import pytest
import torch

from specdec.bench.pricing import CostTable
from specdec.drafters import EmptyDrafter
from specdec.drafters.pearl import PearlDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.enumeration import enumerate_outcomes, total_variation, truncate_at_stop
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Tokenwise

PROMPT, VOCAB, TARGET_SEED = [0, 1], 2, 7
TABLE = CostTable(times={"target": {1: 0.011, 4: 0.014}, "draft": {1: 0.002}})


def watch(drafter: PearlDrafter, seen: set[str]) -> PearlDrafter:
    """Record which branches of PEARL's schedule the drafter takes (PRE / POST steps, kept and
    rolled-back blocks, rejections inside PRE and POST drafts)."""
    propose, observe = drafter.propose, drafter.observe
    mode: list[str] = []

    def watched_propose(ctx):
        mode[:] = ["post" if drafter._next is not None else "pre"]
        return propose(ctx)

    def watched_observe(ctx, draft, verdict):
        before = drafter.counters()
        observe(ctx, draft, verdict)
        after = drafter.counters()
        seen.add(mode[0])
        if verdict.num_accepted < draft.num_drafted:
            seen.add(f"{mode[0]}_reject")
        seen.update(
            name
            for k, name in (("hits", "hit"), ("misses", "miss"))
            if after.get(k, 0) > before.get(k, 0)
        )

    drafter.propose, drafter.observe = watched_propose, watched_observe
    return drafter


@pytest.mark.parametrize("stop_ids", [(), (1,)], ids=["no-stop", "stop-id"])
@pytest.mark.parametrize("gamma", [2, 3])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
@pytest.mark.parametrize("pre_draft", [0, 1])
def test_pearl_is_exact_at_positive_temperature(pre_draft, temperature, gamma, stop_ids):
    # Two drafts: the target's own table (q = p, blocks kept often) and another table (a poor
    # draft: rejections inside POST drafts). Both must give the target's joint law exactly.
    sampling, length = Sampling(temperature=temperature), 5
    target = TableLM(VOCAB, TARGET_SEED)
    want = truncate_at_stop(ar_joint(target, PROMPT, length, sampling), set(stop_ids))
    seen: set[str] = set()
    for draft_seed in (TARGET_SEED, TARGET_SEED + 1):
        drafter = watch(
            PearlDrafter(
                TableLM(VOCAB, draft_seed, role="draft"),
                Fixed(gamma),
                pre_draft=pre_draft,
                mode="inline",
            ),
            seen,
        )

        def run(coins, drafter=drafter):
            out = generate(
                PROMPT,
                target,
                drafter,
                Tokenwise(),
                sampling=sampling,
                coins=coins,
                max_new_tokens=length,
                stop_ids=stop_ids,
            )
            return tuple(out.tokens)

        got = enumerate_outcomes(run)
        assert abs(sum(got.values()) - 1.0) < 1e-12
        assert total_variation(got, want) <= 1e-12, f"draft seed {draft_seed}"
    assert seen >= {"pre", "post", "hit", "miss", "post_reject"}
    assert ("pre_reject" in seen) == (pre_draft > 0)


def test_pearl_is_exact_greedy_on_tables():
    sampling, length = Sampling(temperature=0.0), 6
    for seed in range(12):
        target = TableLM(VOCAB, seed)
        drafter = PearlDrafter(TableLM(VOCAB, seed + 100, role="draft"), Fixed(3), mode="inline")
        got = enumerate_outcomes(
            lambda coins, d=drafter, t=target: tuple(
                generate(
                    PROMPT, t, d, Tokenwise(), sampling=sampling, coins=coins, max_new_tokens=length
                ).tokens
            )
        )
        assert got == pytest.approx(ar_joint(target, PROMPT, length, sampling), abs=1e-12)


def _pearl(model, draft_model, gamma: int, sampling: Sampling, mode: str = "thread"):
    return PearlDrafter(CachedLM(draft_model, role="draft"), Fixed(gamma), mode=mode)


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
def test_greedy_pearl_emits_ar_tokens_on_the_tiny_fp64_pair(tiny64, self_draft):
    sampling = Sampling(temperature=0.0)
    draft = tiny64.target if self_draft else tiny64.draft
    for text in ("Hello there", "The quick brown fox", "1 2 3"):
        ar = _generate(tiny64, EmptyDrafter(), sampling, 0, text)
        out = _generate(tiny64, _pearl(tiny64.target, draft, 4, sampling), sampling, 0, text)
        assert out.tokens == ar.tokens, text
        c = out.stats.counters
        if self_draft:  # the target as its own draft: every block is kept after the first
            assert "misses" not in c and c["hits"] >= 8 and c["rolled_back"] == 0
            assert c["post_steps"] > c["pre_steps"] == 1
        else:  # a block per step, but for the last steps (too few tokens left to gain)
            blocks = c.get("hits", 0) + c["misses"]
            assert out.stats.target_forwards - 2 <= blocks < out.stats.target_forwards
            assert c.get("pre_steps", 0) + c.get("post_steps", 0) == out.stats.target_forwards


def _slow(drafter: PearlDrafter, rng: random.Random) -> PearlDrafter:
    """Delay every worker job by a random 0-6 ms before it drafts (different timing per run)."""
    job = drafter.chain.propose

    def delayed(ctx):
        time.sleep(rng.uniform(0.0, 0.006))
        return job(ctx)

    drafter.chain.propose = delayed
    return drafter


@pytest.mark.parametrize("self_draft", [False, True], ids=["tiny-draft", "target-as-draft"])
def test_same_seed_same_output_whatever_the_worker_timing(tiny64, self_draft):
    sampling = Sampling(temperature=1.0)
    draft = tiny64.target if self_draft else tiny64.draft
    runs = [
        _generate(tiny64, _pearl(tiny64.target, draft, 3, sampling, "inline"), sampling, 5),
        _generate(tiny64, _pearl(tiny64.target, draft, 3, sampling), sampling, 5),
    ]
    for timing_seed in (1, 2):
        slow = _slow(_pearl(tiny64.target, draft, 3, sampling), random.Random(timing_seed))
        runs.append(_generate(tiny64, slow, sampling, 5))
    first = runs[0]
    for other in runs[1:]:
        assert other.tokens == first.tokens
        assert other.stats.counters == first.stats.counters
        assert other.stats.accepted_per_step == first.stats.accepted_per_step
        assert other.stats.drafted_per_step == first.stats.drafted_per_step
    assert first.stats.counters.get("hits", 0) > 0 or not self_draft  # the kept path ran
    other_seed = _generate(tiny64, _pearl(tiny64.target, draft, 3, sampling), sampling, 6)
    assert other_seed.tokens != first.tokens  # the seed matters (40 tokens at T=1)


def test_the_workers_forwards_run_on_their_lane_and_price_as_max_per_step(tiny64):
    sampling = Sampling(temperature=0.0)
    out = _generate(tiny64, _pearl(tiny64.target, tiny64.target, 3, sampling), sampling, 0)
    fw, steps = out.stats.forwards, out.stats.target_forwards
    drafts = [f for f in fw if f.role == "draft"]
    assert drafts and all(f.lane == "pearl" for f in drafts)  # no draft work on the main lane
    assert [f.step for f in fw if f.role == "target"] == list(range(steps))
    assert {f.step for f in drafts} <= set(range(steps))
    per_step: dict[int, dict[str, float]] = {}
    for f in fw:
        lanes = per_step.setdefault(f.step, {})
        lanes[f.lane] = lanes.get(f.lane, 0.0) + TABLE.cost(f.role, f.new_tokens, f.context)
    assert TABLE(fw) == pytest.approx(sum(max(v.values()) for v in per_step.values()), rel=1e-12)
    assert TABLE(fw) < sum(TABLE.cost(f.role, f.new_tokens, f.context) for f in fw)


def test_a_failed_generation_leaves_the_drafter_reusable(tiny64):
    sampling = Sampling(temperature=1.0)
    drafter = _pearl(tiny64.target, tiny64.draft, 3, sampling)
    target = CachedLM(tiny64.target)
    ids = tiny64.tokenizer.encode("Hello there")
    real = target.forward
    calls = {"n": 0}

    def failing(*args, **kwargs):  # the target fails at step 2, while the worker drafts
        calls["n"] += 1
        if calls["n"] == 4:  # prefill, steps 0 and 1, then step 2
            raise RuntimeError("target fell over")
        return real(*args, **kwargs)

    target.forward = failing
    with pytest.raises(RuntimeError, match="target fell over"):
        generate(
            ids,
            target,
            drafter,
            Tokenwise(),
            sampling=sampling,
            coins=TorchCoins(3),
            max_new_tokens=20,
        )
    assert drafter.ahead.busy  # the job of step 2 was never taken ...
    target.forward = real
    again = generate(
        ids, target, drafter, Tokenwise(), sampling=sampling, coins=TorchCoins(3), max_new_tokens=20
    )  # ... reset drops it
    fresh = _generate(tiny64, _pearl(tiny64.target, tiny64.draft, 3, sampling), sampling, 3, n=20)
    assert again.tokens == fresh.tokens and not drafter.ahead.busy
    assert torch.equal(
        torch.tensor(again.stats.accepted_per_step), torch.tensor(fresh.stats.accepted_per_step)
    )


def test_pre_draft_is_checked_and_drafts_on_the_main_lane(tiny64):
    sampling = Sampling(temperature=0.0)
    with pytest.raises(ValueError, match="drafter.pre_draft must be >= 0"):
        PearlDrafter(CachedLM(tiny64.draft, role="draft"), Fixed(3), pre_draft=-1)
    ar = _generate(tiny64, EmptyDrafter(), sampling, 0).tokens
    for draft, kept in ((tiny64.draft, "misses"), (tiny64.target, "hits")):
        drafter = PearlDrafter(CachedLM(draft, role="draft"), Fixed(3), pre_draft=1)
        out = _generate(tiny64, drafter, sampling, 0)
        assert out.tokens == ar
        c, fw = out.stats.counters, out.stats.forwards
        main = [f for f in fw if f.role == "draft" and f.lane != "pearl"]
        assert len(main) == c["pre_steps"] and c[kept] > 0  # one serial forward per PRE step
        assert sum(out.stats.drafted_per_step) <= c["draft_tokens"]  # PRE tokens counted too
