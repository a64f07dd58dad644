"""The hybrid drafter's gate (``drafters/hybrid_gate.py``): the model tree skipped for a step when
the best lookup chain is trusted.

* the rule: skip when the best chain's expected accepted length is at least ``gate_tokens`` above
  the model's running added tokens; ``off`` never skips; held positions come back in order;
* exact at T = 1 by enumeration through the engine with the gate firing on some paths (the
  skipped steps' positions caught up later, in one forward) and with it never firing;
* greedy = ``ar`` on the tiny fp64 pair with the gate firing, and the model's trees after a
  deferred catch-up equal those of a run catching up every step;
* ``gate: off`` grows the model tree every step with that step's own positions, token for token
  and counter for counter as a gate that cannot open.
"""

from __future__ import annotations

import pytest
import torch

from specdec.bench.run.runner import build_method
from specdec.drafters.hybrid_gate import ModelGate
from specdec.engine import generate
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.enumeration import max_abs_error
from specdec.testing.table_hybrid import (
    BigramTable,
    outcomes_and_counters,
    repeating_prompt,
    table_hybrid,
)
from specdec.testing.table_lm import ar_joint
from specdec.verifiers import RecursiveRejection


def test_the_rule_compares_the_best_chain_with_the_model_added_tokens():
    gate = ModelGate("auto", tokens=0.5, discount=1.0, prior=1.0, weight=2.0)
    assert gate.model_added == 1.0  # no grown step yet: the prior
    assert gate.skip(1.5) and not gate.skip(1.49)
    gate.update(0), gate.update(0)  # m = (0 + 1 * 2) / (2 + 2)
    assert gate.model_added == 0.5 and gate.skip(1.0) and not gate.skip(0.99)
    assert not ModelGate("off", tokens=0.5).skip(100.0)
    a, b, c = torch.zeros(1, 2, 3), torch.ones(2, 2, 3), torch.full((1, 2, 3), 2.0)
    gate.hold(a), gate.hold(None), gate.hold(b)
    assert torch.equal(gate.release(c), torch.cat([a, b, c]))  # held first, in order
    assert gate.held is None and gate.release(c) is c
    gate.hold(a)
    assert torch.equal(gate.release(None), a)
    gate.reset()
    assert gate.held is None and gate.model_added == 0.5  # a generation resets what is held
    gate.fresh()
    assert gate.model_added == 1.0


def _record_catch_ups(drafter) -> list[tuple[int, int]]:
    """Per model catch-up: (positions it forwards, positions its step verified itself)."""
    seen: list[tuple[int, int]] = []
    own = [0]
    propose, catch_up = drafter.propose, drafter.model.catch_up

    def rows(ctx) -> int:
        return 0 if ctx.target_features is None else int(ctx.target_features.shape[0])

    def noted_propose(ctx):
        own[0] = rows(ctx)
        return propose(ctx)

    def noted_catch_up(ctx):
        seen.append((rows(ctx), own[0]))
        return catch_up(ctx)

    drafter.propose, drafter.model.catch_up = noted_propose, noted_catch_up
    return seen


class EveryOtherStep(ModelGate):
    """A gate that skips every second step of a generation: a function of the past (the step
    count), so the hybrid stays exact; step 0 holds no positions (the prompt's went to the
    prefill), so each skip from step 1 on defers positions to the next step's catch-up."""

    def reset(self) -> None:
        super().reset()
        self.calls = 0

    def skip(self, best: float) -> bool:
        self.calls += 1
        return self.calls % 2 == 0


@pytest.mark.parametrize("gate", ["auto", "every other step", "auto 2.0"])
def test_hybrid_with_the_gate_is_lossless_at_t1_through_the_engine(tmp_path, gate):
    """``auto``: lookup prior 0.9, so a 3-token chain's expected length (2.4) beats the model's
    prior of 1 added token from the first step; ``every other step``: skips followed by deferred
    catch-ups; ``auto 2.0`` (lookup prior 0.5): no 3-token chain reaches 2 + m in 3 steps, so the
    gate never fires."""
    vocab, length = 20, 3
    sampling, target = Sampling(temperature=1.0, top_k=2), BigramTable(vocab, 2, scale=3.0)
    prompt = repeating_prompt(target)
    kw = {"prior": 0.9, "gate_tokens": 0.0} if gate == "auto" else {"gate_tokens": 2.0}
    drafter = table_hybrid(tmp_path, vocab, total_tokens=4, **kw)
    if gate == "every other step":
        drafter.gate = EveryOtherStep()
    catch_ups = _record_catch_ups(drafter)
    got, seen = outcomes_and_counters(
        prompt, target, drafter, RecursiveRejection(), sampling, length
    )
    assert max_abs_error(got, ar_joint(target, prompt, length, sampling)) < 1e-12
    assert seen["hybrid_lookup_accepted"] > 0 and seen["hybrid_model_nodes"] > 0
    deferred = [n for n, own in catch_ups if n > own]  # held positions caught up with the own
    if gate == "auto 2.0":
        assert "hybrid_gated" not in seen and not deferred
    else:
        assert seen["hybrid_gated"] > 0
        assert bool(deferred) == (gate == "every other step")


def _tiny_method(compose, tiny64, method: str, *extra: str):
    over = ["sampling.temperature=0", "model.placement.dtype=float64", *extra]
    return build_method(compose("eval", [f"method={method}", *over]), tiny64)


def _greedy(m, tiny64, text: str, trees: list | None = None):
    """Greedy tokens and stats; ``trees`` collects, per model tree grown, (committed length,
    tokens, parents, scores, whether its catch-up forwarded positions of skipped steps)."""
    if trees is not None:
        grow, catch_ups = m.drafter.model._grow, _record_catch_ups(m.drafter)

        def recorded(tree, ctx, depth_limit):
            grow(tree, ctx, depth_limit)
            n, own = catch_ups[-1]
            tokens = (tree.token[:], tree.parent[:], tree.score[:])
            trees.append((int(ctx.tokens.numel()), *tokens, n > own))

        m.drafter.model._grow = recorded
    out = generate(
        tiny64.tokenizer.encode(text),
        m.target,
        m.drafter,
        m.verifier,
        sampling=m.sampling,
        coins=TorchCoins(0),
        max_new_tokens=24,
    )
    return out.tokens, out.stats


@pytest.mark.parametrize("method", ["eagle3_pld", "specblock_pld"])
def test_gated_greedy_run_emits_ar_tokens_and_defers_the_catch_up_exactly(compose, tiny64, method):
    text = "the cat sat on the mat. the cat sat on the mat. the cat"
    ar, _ = _greedy(_tiny_method(compose, tiny64, "ar"), tiny64, text)
    off_trees: list = []
    off, off_stats = _greedy(
        _tiny_method(compose, tiny64, method, "drafter.gate=off"), tiny64, text, off_trees
    )
    on_trees: list = []
    on, on_stats = _greedy(_tiny_method(compose, tiny64, method), tiny64, text, on_trees)
    assert on == off == ar
    assert on_stats.counters["hybrid_gated"] > 0
    assert on_stats.draft_forwards < off_stats.draft_forwards
    # the model's tree at a committed length is the same whether its catch-up was deferred
    by_length = {t[0]: t for t in off_trees}
    common = [t for t in on_trees if t[0] in by_length]
    assert any(deferred for *_, deferred in common)
    for length, token, parent, score, _ in common:
        _, token0, parent0, score0, deferred0 = by_length[length]
        assert (token, parent) == (token0, parent0) and not deferred0, length
        assert score == pytest.approx(score0, abs=1e-9), length


@pytest.mark.parametrize("method", ["eagle3_pld", "specblock_pld"])
def test_gate_off_grows_the_model_every_step_as_a_gate_that_cannot_open(compose, tiny64, method):
    text = "the cat sat on the mat. the cat sat on the mat. the cat"
    off = _tiny_method(compose, tiny64, method, "drafter.gate=off")
    catch_ups = _record_catch_ups(off.drafter)
    tokens, stats = _greedy(off, tiny64, text)
    shut = _tiny_method(compose, tiny64, method, "drafter.gate_tokens=1e9")
    tokens_shut, stats_shut = _greedy(shut, tiny64, text)
    assert tokens == tokens_shut and stats.counters == stats_shut.counters
    assert stats.draft_forwards == stats_shut.draft_forwards
    assert len(catch_ups) == stats.target_forwards  # every step caught up on its own positions
    assert all(n == own for n, own in catch_ups) and "hybrid_gated" not in stats.counters
