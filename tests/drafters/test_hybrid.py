"""The hybrid drafter (``drafters/hybrid.py``, ``merge.py``, ``acceptance.py``): lookup matches and
a feature drafter's candidates in one tree.

* the merged trie: shared prefixes merge, a node takes the larger estimate capped by its parent's;
* the scoring: a long match whose nodes keep being accepted wins the budget over a weak model
  branch, and a confident model branch wins it over a short match that keeps failing;
* ``method=eagle3_pld`` / ``specblock_pld`` emit ``ar``'s tokens greedily on the tiny fp64 pair
  (static and cost budgets), with lookup and model nodes both kept and accepted;
* the real hybrid (SpecBlock table net + lookup) through the real engine on a TableLM target is
  lossless at T = 1 under the point-mass tree rules (exact enumeration), static and cost budgets;
* bad settings are refused naming the key.
"""

from __future__ import annotations

import math

import pytest

from specdec.bench.pricing import CostTable
from specdec.bench.run.runner import build_method
from specdec.drafters.acceptance import LookupRates, ModelCalibration
from specdec.drafters.candidates import Candidates
from specdec.drafters.hybrid import match_length
from specdec.drafters.merge import MergedTree
from specdec.engine import generate
from specdec.errors import BadInput
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.enumeration import max_abs_error
from specdec.testing.table_hybrid import (
    BigramTable,
    outcomes_and_counters,
    repeating_prompt,
    table_hybrid,
)
from specdec.testing.table_lm import ar_joint
from specdec.verifiers import Hierarchical, RecursiveRejection

CPU_TABLE = {
    "times": {"target": {1: 0.030, 2: 0.031, 4: 0.033, 8: 0.036, 16: 0.060}},
    "slopes": {"target": 1e-5},
    "ref_context": 64,
}
COSTS = [
    "drafter.budget=cost",
    "+drafter.costs._target_=specdec.bench.pricing.CostTable.from_dict",
    "+drafter.costs.data={times:{target:{1:0.03,2:0.031,4:0.033,8:0.036,"
    "16:0.06}},slopes:{target:0.00001},ref_context:64}",
]


def test_the_trie_merges_shared_prefixes_and_caps_estimates_by_the_parent():
    model = Candidates()
    a, b = model.add_children(-1, [math.log(0.6), math.log(0.25)], [7, 8])
    model.add_children(a, [math.log(0.5)], [9])  # path 7 9: p = 0.3
    tree = MergedTree()
    tree.add_model(model)
    tree.add_chain([7, 9, 4], [0.2, 0.15, 0.1], chain=0)  # shares 7 9 with the model
    tree.add_chain([5, 6], [0.9, 0.95], chain=1)  # 0.95 > 0.9: capped by the parent
    assert len(tree) == 6 and tree.token == [7, 8, 9, 4, 5, 6]
    assert tree.parent == [-1, -1, 0, 2, -1, 4] and tree.chain == [0, None, 0, 0, 1, 1]
    est = tree.estimates(lambda p: p)
    assert est == pytest.approx([0.6, 0.25, 0.3, 0.1, 0.9, 0.9])
    cands, _ = tree.candidates(lambda p: p)
    assert cands.best(3) == [0, 4, 5]  # 0.9, 0.9, 0.6; ancestors first, by depth
    draft = cands.to_draft(1, cands.best(4))
    assert draft.tokens.tolist() == [1, 7, 5, 9, 6]  # 0.9, 0.9, 0.6, 0.3: not 8 (0.25)
    assert draft.parent.tolist() == [-1, 0, 0, 1, 2]


def test_match_length_counts_the_suffix_match():
    ids = [1, 2, 3, 9, 2, 3]
    assert match_length(ids, 3, ids, 6) == 2  # 2 3 | 9 matches the suffix 2 3
    assert match_length(ids, 3, ids, 1) == 1
    assert match_length([4, 3, 7], 2, ids, 6) == 1


def _ranked_sources(rates: LookupRates, calibration: ModelCalibration, length: int) -> list[str]:
    """The kept order of a 4-token match of ``length`` and a model branch p = 0.5, 0.25."""
    model = Candidates()
    (a,) = model.add_children(-1, [math.log(0.5)], [1])
    model.add_children(a, [math.log(0.5)], [2])
    tree = MergedTree()
    tree.add_model(model)
    tree.add_chain([5, 6, 7, 8], rates.path(length, 4), chain=0)
    cands, _ = tree.candidates(calibration.estimate)
    order = sorted(range(len(tree)), key=lambda i: (-cands.score[i], cands.depth[i]))
    return ["lookup" if tree.chain[i] is not None else "model" for i in order]


def test_a_confident_long_match_wins_budget_and_a_failing_short_one_loses_it():
    rates, calibration = LookupRates(6, 8), ModelCalibration()
    for _ in range(30):  # long matches: fully accepted; one-token matches: rejected at once
        rates.update(6, [True] * 4)
        rates.update(1, [False])
        calibration.update(0.75, 0)  # the model's nodes predicted 0.75 accepted, none were
    assert rates.rate(6, 4) > 0.9 and rates.rate(1, 1) < 0.1 and calibration.scale < 0.2
    assert _ranked_sources(rates, calibration, 6) == ["lookup"] * 4 + ["model"] * 2
    assert _ranked_sources(rates, ModelCalibration(), 1) == ["model"] * 2 + ["lookup"] * 4
    fresh = ModelCalibration()
    for _ in range(30):
        fresh.update(0.75, 1)  # an under-confident model: scaled up (capped at 1), ahead of
    assert fresh.scale > 1.2 and fresh.estimate(0.9) == 1.0  # the prior's 0.5 lookup node
    assert _ranked_sources(LookupRates(6, 8), fresh, 6)[0] == "model"
    assert rates.tries[1][2] == 0  # nothing after a rejection is counted as tried


def test_the_presets_compose_the_two_drafters(compose, tiny64):
    for method, inner in (("eagle3_pld", "Eagle3Drafter"), ("specblock_pld", "SpecBlockDrafter")):
        cfg = compose("eval", [f"method={method}", "model.placement.dtype=float64"])
        m = build_method(cfg, tiny64)
        assert type(m.drafter).__name__ == "HybridDrafter" and m.drafter.makes_trees
        assert type(m.drafter.model).__name__ == inner
        assert m.drafter.lookup.branches == 2 and m.drafter.budget.mode == "static"
        assert m.drafter.target_layers == m.drafter.model.target_layers
        assert "drafter.net" in m.drafter.modules()


TEXTS = ("the cat sat on the mat. the cat sat on the mat. the cat", "Once upon a time")


@pytest.mark.parametrize("budget", ["static", "cost"])
@pytest.mark.parametrize("method", ["eagle3_pld", "specblock_pld"])
def test_greedy_hybrid_emits_ar_tokens_on_the_tiny_fp64_pair(compose, tiny64, method, budget):
    extra = COSTS if budget == "cost" else []
    m = build_method(
        compose(
            "eval",
            [f"method={method}", "sampling.temperature=0", "model.placement.dtype=float64", *extra],
        ),
        tiny64,
    )
    ar = build_method(
        compose("eval", ["method=ar", "sampling.temperature=0", "model.placement.dtype=float64"]),
        tiny64,
    )
    assert m.drafter.budget.mode == budget
    total: dict[str, int] = {}
    for text in TEXTS:
        ids = tiny64.tokenizer.encode(text)
        got = generate(
            ids,
            m.target,
            m.drafter,
            m.verifier,
            sampling=m.sampling,
            coins=TorchCoins(0),
            max_new_tokens=24,
        )
        want = generate(
            ids,
            ar.target,
            ar.drafter,
            ar.verifier,
            sampling=ar.sampling,
            coins=TorchCoins(0),
            max_new_tokens=24,
        )
        assert got.tokens == want.tokens, text
        for k, v in got.stats.counters.items():
            total[k] = total.get(k, 0) + v
    assert total["hybrid_lookup_accepted"] > 0 and total["hybrid_model_nodes"] > 0
    assert total["hybrid_kept"] <= total["hybrid_candidates"]


@pytest.mark.parametrize(
    "verifier,budget", [(RecursiveRejection(), "static"), (Hierarchical(), "cost")]
)
def test_hybrid_is_lossless_at_t1_through_the_engine(tmp_path, verifier, budget):
    vocab, length = 20, 3
    sampling, target = Sampling(temperature=1.0, top_k=2), BigramTable(vocab, 2, scale=3.0)
    prompt = repeating_prompt(target)  # the target's greedy chain from 0, then its start again
    kw = (
        {"total_tokens": 4}
        if budget == "static"
        else {"budget": "cost", "costs": CostTable.from_dict(CPU_TABLE), "max_tokens": 12}
    )
    drafter = table_hybrid(tmp_path, vocab, **kw)
    got, seen = outcomes_and_counters(prompt, target, drafter, verifier, sampling, length)
    assert max_abs_error(got, ar_joint(target, prompt, length, sampling)) < 1e-12
    # both sources had kept nodes accepted on some path
    assert seen["hybrid_lookup_accepted"] > 0 and seen["hybrid_model_accepted"] > 0


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(BadInput, match="drafter.budget=cost needs a verify cost table"):
        table_hybrid(tmp_path, 20, budget="cost")
    with pytest.raises(BadInput, match="drafter.budget must be one of"):
        table_hybrid(tmp_path, 20, budget="dynamic")
    with pytest.raises(BadInput, match="drafter.lookup_depth"):
        table_hybrid(tmp_path, 20, lookup_depth=0)
    with pytest.raises(BadInput, match="drafter.gate must be one of"):
        table_hybrid(tmp_path, 20, gate="always")
    with pytest.raises(BadInput, match="drafter.gate_tokens must be >= 0"):
        table_hybrid(tmp_path, 20, gate_tokens=-1)
    with pytest.raises(BadInput, match="drafter.max_tokens=5000"):
        table_hybrid(
            tmp_path,
            20,
            budget="cost",
            max_tokens=5000,
            costs=CostTable.from_dict(CPU_TABLE),
        )
