"""The node budget chosen by cost (``drafters/budget.py``).

With a given cost table and acceptance profile the chosen count is the brute-force argmax of
expected tokens per second, worked out by hand on a flat (CPU-like) and a steep table: the flat
one keeps every useful node, the steep one only confident ones, none when even the best does not
pay; context length and drafting seconds move the choice as the formula says; the static rule
keeps ``total`` whatever the estimates.
"""

from __future__ import annotations

import pytest

from specdec.bench.pricing import CostTable
from specdec.drafters.budget import NodeBudget, VerifyCost, best_count
from specdec.errors import BadInput

# seconds of a target forward of n tokens at context 100 (+ 1e-4 s per context token)
FLAT = CostTable(
    {"target": {1: 0.030, 2: 0.031, 4: 0.033, 8: 0.036, 16: 0.060}},
    {"target": 1e-4},
    ref_context=100,
)
STEEP = CostTable({"target": {1: 0.020, 2: 0.030, 4: 0.050, 8: 0.090}}, ref_context=100)
PROFILE = [0.9, 0.8, 0.6, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01, 0.01]


def brute_force(accept, table, context, draft_s):
    rates = [
        (1 + sum(accept[:n])) / (draft_s + table.cost("target", n + 1, context))
        for n in range(len(accept) + 1)
    ]
    return max(range(len(rates)), key=lambda n: (rates[n], -n))


def test_the_table_satisfies_the_protocol():
    assert isinstance(FLAT, VerifyCost)


def test_a_flat_table_keeps_the_useful_nodes_and_a_steep_one_the_confident_ones():
    flat = NodeBudget("cost", max_nodes=16, costs=FLAT)
    steep = NodeBudget("cost", max_nodes=16, costs=STEEP)
    # a node pays when a_n / dV >= E(n - 1) / V(n), dV the extra verify seconds of its token.
    # flat: V(n) = 29 + n ms up to 4 tokens, +0.75 ms per token to 8: the 7th node (0.05) would
    # need a_n >= 3.9 / 35.25 ms * 0.75 ms = 0.083
    assert flat.choose(PROFILE, 100) == 6 == brute_force(PROFILE, FLAT, 100, 0.0)
    # steep: V(n) = 10 + 10 n ms: the 3rd node (0.6) would need a_n >= 2.7 / 40 ms * 10 ms = 0.675
    assert steep.choose(PROFILE, 100) == 2 == brute_force(PROFILE, STEEP, 100, 0.0)
    # nothing worth verifying on the steep table: an AR step
    assert steep.choose([0.4, 0.3], 100) == 0
    assert flat.choose([], 100) == 0


def test_drafting_seconds_and_the_context_move_the_choice_as_the_formula_says():
    steep = NodeBudget("cost", max_nodes=16, costs=STEEP)
    for draft_s in (0.0, 0.01, 0.05, 0.2):
        assert steep.choose(PROFILE, 100, draft_s) == brute_force(PROFILE, STEEP, 100, draft_s)
    # drafting already paid makes more nodes worth it (the denominator's fixed part grows)
    assert steep.choose(PROFILE, 100, 0.2) > steep.choose(PROFILE, 100, 0.0)
    flat = NodeBudget("cost", max_nodes=16, costs=FLAT)
    for context in (10, 100, 2000):
        assert flat.choose(PROFILE, context) == brute_force(PROFILE, FLAT, context, 0.0)
    assert flat.verify_seconds(1, 2100) == pytest.approx([0.230, 0.231])  # slope x 2000


def test_max_nodes_caps_and_the_static_rule_ignores_the_estimates():
    assert NodeBudget("cost", max_nodes=2, costs=FLAT).choose(PROFILE, 100) == 2
    static = NodeBudget("static", total=4)
    assert static.choose(PROFILE, 100) == 4 and static.choose([0.001], 100) == 1
    assert static.largest == 4 and NodeBudget("cost", max_nodes=9, costs=FLAT).largest == 9


def test_best_count_breaks_ties_toward_fewer_nodes():
    assert best_count([0.5], [1.0, 1.5], 0.0) == 0  # 1 / 1 == 1.5 / 1.5
    assert best_count([0.6], [1.0, 1.5], 0.0) == 1


def test_bad_settings_are_refused():
    with pytest.raises(BadInput, match="drafter.budget=cost needs a verify cost table"):
        NodeBudget("cost")
    with pytest.raises(BadInput, match="drafter.budget must be one of"):
        NodeBudget("auto")
    with pytest.raises(BadInput, match="drafter.total_tokens"):
        NodeBudget("static", total=0)
