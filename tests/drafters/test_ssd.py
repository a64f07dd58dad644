"""SSD / SAGUARO (``specdec.drafters.ssd``) on table LMs: exact at T > 0 through the real engine on
every path (cache hit, cache miss, the ``jit`` and ``none`` fallbacks, SAGUARO on and off, a stop
id), a mislabelled SAGUARO q caught, the cache's planned outcomes, greedy exact. The tiny pair and
the CLI run: ``test_ssd_pair.py``.

The exact tests run the worker inline (the enumeration harness needs a fixed draw order); every
chain of every speculation draws from its own forked stream, and the harness enumerates all of
them, used or not. Each case checks that the paths it enumerated took the branches it covers.
"""

from __future__ import annotations

import pytest
import torch

from specdec.drafters import saguaro, ssd_cache
from specdec.drafters import ssd as ssd_mod
from specdec.drafters.policies import Fixed
from specdec.drafters.ssd import SsdDrafter
from specdec.engine import generate
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
        seen.update(
            name for name in ("jit_steps", "root_steps") if after.get(name, 0) > before.get(name, 0)
        )
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
        drafter = watch(
            SsdDrafter(
                TableLM(VOCAB, draft_seed, role="draft"),
                Fixed(gamma),
                budget=budget,
                saguaro_c=c,
                backup=backup,
                mode="inline",
                **kw,
            ),
            seen,
        )

        def run_once(coins, drafter=drafter):
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
    return warp(
        torch.stack([lm.logits(tuple(ids[:i])) for i in range(len(ctx.tokens), len(ids))]),
        ctx.sampling,
    )


def test_saguaro_for_sampling_only_is_caught():
    # The harness can fail: chains drawn from q' but verified against the plain q (SAGUARO not
    # applied on the verifier's side) must break the law.
    sampling, length = Sampling(temperature=1.0), 4
    target = TableLM(VOCAB, TARGET_SEED)
    want = ar_joint(target, PROMPT, length, sampling)
    drafter = SsdDrafter(
        TableLM(VOCAB, TARGET_SEED + 1, role="draft"),
        Fixed(2),
        budget=1,
        saguaro_c=0.4,
        backup="jit",
        mode="inline",
    )
    propose = drafter.propose

    def mislabelled(ctx):
        draft = propose(ctx)
        if not draft.num_drafted:
            return draft
        q = torch.cat([_plain_q(drafter, ctx, draft), draft.q[-1:]])  # [K+1, V]
        return ssd_mod.Draft(draft.tokens, draft.parent, q)

    drafter.propose = mislabelled
    got = enumerate_outcomes(
        lambda coins: tuple(
            generate(
                PROMPT,
                target,
                drafter,
                Tokenwise(),
                sampling=sampling,
                coins=coins,
                max_new_tokens=length,
            ).tokens
        )
    )
    assert total_variation(got, want) > 1e-3


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_cache_holds_the_planned_outcomes_and_their_best_candidates(temperature):
    # V = 6, draft [s_1, s_2]: outcome k gets the F_k best draft tokens at slot k (s_{k+1}
    # excluded), each with a chain of L_k tokens drawn after prefix + s_1..s_k + c
    sampling, vocab = Sampling(temperature=temperature), 6
    lm = TableLM(vocab, 3, role="draft")
    ids, s = [0, 1, 2], [4, 5]
    plan = ssd_cache.Plan(
        ids=ids, draft=s, fanout=[2, 0, 3], lengths=[2, 1, 1], coins=TorchCoins(0)
    )
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
        assert all(
            int(ch.tokens[1]) == int(lm.logits(tuple(ids + s[:k] + [c])).argmax())
            for (k, c), ch in cache.items()
        )
    # one tree: reconcile, glue (s_1, s_2), then one forward per chain depth (2)
    assert [f.new_tokens for f in lm.forward_log][-3:] == [2, 5, 2]


def test_ssd_is_exact_greedy_on_tables():
    sampling, length = Sampling(temperature=0.0), 6
    for seed in range(8):
        target = TableLM(VOCAB, seed)
        drafter = SsdDrafter(
            TableLM(VOCAB, seed + 100, role="draft"),
            Fixed(3),
            budget=2,
            saguaro_c=0.5,
            mode="inline",
        )
        got = enumerate_outcomes(
            lambda coins, d=drafter, t=target: tuple(
                generate(
                    PROMPT, t, d, Tokenwise(), sampling=sampling, coins=coins, max_new_tokens=length
                ).tokens
            )
        )
        assert got == pytest.approx(ar_joint(target, PROMPT, length, sampling), abs=1e-12)
