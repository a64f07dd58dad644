"""SSD's computed fan-out and fallback rule (``specdec.drafters.ssd_fanout``), SAGUARO's reshape
(``specdec.drafters.saguaro``) and the candidate choice (``specdec.drafters.ssd_cache``): values
worked out by hand from known histograms, the paper's geometric shape, caps, and updates."""

from __future__ import annotations

import pytest
import torch

from specdec.drafters.saguaro import reshape
from specdec.drafters.ssd_cache import candidates
from specdec.drafters.ssd_fanout import FanOut, allocate


def _fan(budget: int, r: float, hist: list[int], **kw) -> FanOut:
    fan = FanOut(budget, r, **kw)
    for k, count in enumerate(hist):
        for _ in range(count):
            fan.observe(len(hist) - 1, k)
    return fan


def test_fanout_from_a_known_histogram_matches_the_formula_and_the_budget():
    # hist [4, 2, 2] of K=2 drafts + 8 pseudo-steps of the prior α=1/2 ([.5, .25, .25]):
    # P = [8, 4, 4] / 16 = [.5, .25, .25]
    fan = _fan(8, 0.0, [4, 2, 2], prior_accept=0.5, prior_weight=8)
    assert fan.outcome_probs(2) == pytest.approx([0.5, 0.25, 0.25], abs=1e-15)
    assert fan.fanout(2, [8, 8, 8]) == [4, 2, 2]  # r = 0: F ∝ P
    # r = 1: F ∝ √P -> shares 8·[.4142, .2929, .2929] = [3.31, 2.34, 2.34]; largest remainder
    # gives the 8th to k=1 (tie with k=2: the smaller k)
    fan.r = 1.0
    assert fan.fanout(2, [8, 8, 8]) == [3, 3, 2]
    # a cap: k=0 has one candidate; the other 7 are shared by k=1, 2 as √P (equal): 3.5 each
    assert fan.fanout(2, [1, 8, 8]) == [1, 4, 3]
    # caps below the budget: every candidate is drafted
    assert fan.fanout(2, [1, 1, 2]) == [1, 1, 2]
    assert fan.fanout(2, [0, 0, 0]) == [0, 0, 0]


@pytest.mark.parametrize("alpha,r", [(0.8, 0.5), (0.6, 2.0)])
def test_the_prior_gives_the_papers_geometric_shape(alpha, r):
    # no counts: P is the geometric prior, so F_k = F_0 α^{k/(1+r)} (k < K) and
    # F_K = F_0 α^{K/(1+r)} (1-α)^{-1/(1+r)} (the paper's geometric fan-out), up to rounding of a
    # large budget
    K, budget = 4, 100_000
    fan = FanOut(budget, r, prior_accept=alpha)
    f = fan.fanout(K, [budget] * (K + 1))
    assert sum(f) == budget
    for k in range(1, K):
        assert f[k] / f[0] == pytest.approx(alpha ** (k / (1 + r)), rel=1e-3)
    assert f[K] / f[0] == pytest.approx(
        alpha ** (K / (1 + r)) * (1 - alpha) ** (-1 / (1 + r)), rel=1e-3
    )


def test_fanout_updates_from_counts():
    fan = FanOut(6, 0.0, prior_accept=0.5, prior_weight=2)
    caps = [6, 6, 6]
    start = fan.fanout(2, caps)
    assert start == [3, 2, 1]  # prior P = [.5, .25, .25]: shares [3, 1.5, 1.5]
    fan.observe(0, 0)  # an empty draft is not an outcome
    assert fan.fanout(2, caps) == start and not fan.hist
    for _ in range(40):  # every draft fully accepted: the bonus outcome takes the budget
        fan.observe(2, 2)
    after = fan.fanout(2, caps)
    assert after == [0, 0, 6]  # shares 6·[1, .5, 40.5]/42 = [.14, .07, 5.79]
    assert fan.outcome_probs(2) == pytest.approx([(0 + 1) / 42, (0 + 0.5) / 42, (40 + 0.5) / 42])
    assert fan.fanout(3, [6] * 4)[0] >= 2  # drafts of another length keep their own histogram
    fan.reset()
    assert fan.fanout(2, caps) == start


def test_allocate_shares_capped_budget_and_rounds_by_largest_remainder():
    assert allocate([1, 1, 1], 4, [4, 4, 4]) == [2, 1, 1]
    assert allocate([0, 0, 1], 3, [3, 3, 1]) == [1, 1, 1]  # capped weight, the rest evenly
    assert allocate([5, 1], 3, [0, 9]) == [0, 3]
    assert sum(allocate([0.3, 0.2, 0.5], 7, [2, 9, 9])) == 7


def test_the_fallback_rule_weighs_miss_rate_and_backup_cost():
    # α from the histogram: 2 accepted, 2 rejections (+ 1 pseudo-step at .5) -> (2 + .5)/(4 + 1)
    fan = _fan(4, 0.5, [1, 1, 0], prior_accept=0.5, prior_miss=0.5, prior_weight=1)
    fan.observe(2, 2)
    fan.observe(2, 0)  # hist [2, 1, 1]: accepted 1 + 2 = 3, rejections 3
    a = (3 + 0.5) / (6 + 1)
    assert fan.accept_rate() == pytest.approx(a)
    for hit in (True, False, False, False):
        fan.cache(hit)
    m = (3 + 0.5) / (4 + 1)
    assert fan.miss_rate() == pytest.approx(m)
    gamma = 3
    e = 1 + a + a**2 + a**3
    for cost in (0.0, 0.05, 0.2, 0.5, 1.0):
        want = e / (1 + m * gamma * cost) > (1 - m) * e + m
        assert fan.use_jit(gamma, cost) == want
    assert fan.use_jit(gamma, 0.0) and not fan.use_jit(gamma, 1.0)  # both answers occur


def test_saguaro_reshape_and_candidates():
    q = torch.tensor([[0.5, 0.3, 0.2], [0.0, 1.0, 0.0]], dtype=torch.float64)
    out = reshape(q, 1, 0.5)
    assert out[0].tolist() == pytest.approx([0.25 / 0.75, 0.3 / 0.75, 0.2 / 0.75])
    assert out[1].tolist() == [0.0, 1.0, 0.0]  # greedy rows are unchanged
    assert reshape(q, 2, 0.5)[0].tolist() == pytest.approx([0.25 / 0.6, 0.15 / 0.6, 0.2 / 0.6])
    assert reshape(q, 1, 1.0) is q  # C = 1: off
    assert candidates(torch.tensor([0.1, 0.6, 0.3]), 2, exclude=1) == [2, 0]
    assert candidates(torch.tensor([0.1, 0.6, 0.3]), 5, exclude=None) == [1, 2, 0]
    assert candidates(torch.tensor([0.5, 0.0, 0.5, 0.0]), 3, exclude=0) == [2, 1, 3]
