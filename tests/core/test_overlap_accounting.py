"""Overlap-aware accounting and background work through a test double.

Every forward is logged with start/end, lane and step; ``CostTable(log)`` prices a step as
``serial draft work + max(target lane, each background lane)``, which for a serial method is the
plain sum of its forwards. ``BackgroundDrafter`` (``specdec.testing.doubles``) guesses the bonus
token on a worker lane while the target verifies, drawing from a forked coin stream.
"""

from __future__ import annotations

import pytest
import torch

from specdec.bench.pricing import CostTable
from specdec.drafters import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.forwards import MAIN, ForwardRecord, current_lane, lane, stamp_step
from specdec.lm import CachedLM
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.doubles import BackgroundDrafter
from specdec.verifiers import Tokenwise

# 1 ms per new token plus 10 ms for the target, 2 ms per forward for the draft; no context slope
TABLE = CostTable(times={"target": {1: 0.011, 2: 0.012}, "draft": {1: 0.002, 2: 0.002}})
SAMPLING = Sampling(temperature=1.0)


def _rec(role: str, n: int, step: int, where: str = MAIN) -> ForwardRecord:
    return ForwardRecord(role, n, 100, 0.0, lane=where, step=step)


def test_step_price_is_serial_draft_plus_max_of_target_and_background_lanes():
    log = [
        _rec("draft", 1, 0),
        _rec("draft", 1, 0),
        _rec("target", 3, 0),  # serial step
        _rec("target", 2, 1),
        _rec("draft", 1, 1, "w"),
        _rec("draft", 1, 1, "w"),  # target wins
        _rec("target", 1, 2),
        *[_rec("draft", 1, 2, "w") for _ in range(8)],  # worker wins
        _rec("draft", 1, 3),
        _rec("target", 1, 3),
        _rec("draft", 2, 3, "a"),  # two lanes
        _rec("draft", 2, 3, "b"),
        _rec("draft", 2, 3, "b"),
        _rec("draft", 2, 3, "b"),
        _rec("draft", 5, -1),  # unstamped (outside any step): serial
    ]
    step0 = 2 * 0.002 + 0.013
    step1 = max(0.012, 2 * 0.002)
    step2 = max(0.011, 8 * 0.002)
    step3 = 0.002 + max(0.011, 0.002, 3 * 0.002)
    assert TABLE(log) == pytest.approx(step0 + step1 + step2 + step3 + 0.002)


def test_serial_log_prices_as_the_sum_of_its_forwards():
    log = [
        _rec(role, n, step)
        for step in range(5)
        for role, n in (("draft", 1), ("draft", 1), ("target", 3))
    ]
    assert TABLE(log) == pytest.approx(
        sum(TABLE.cost(f.role, f.new_tokens, f.context) for f in log), rel=1e-12
    )


def test_forwards_inside_a_lane_are_logged_on_it_and_stamping_keeps_declared_steps(tiny64):
    lm = CachedLM(tiny64.draft, role="draft")
    lm.forward(torch.tensor([1, 2]))
    with lane("worker", step=7):
        assert current_lane() == ("worker", 7)
        lm.forward(torch.tensor([3]))
    assert current_lane() == (MAIN, -1)
    lm.forward(torch.tensor([4]))
    assert [(f.lane, f.step) for f in lm.forward_log] == [(MAIN, -1), ("worker", 7), (MAIN, -1)]
    stamp_step(lm.forward_log, 1, 4)  # only unstamped records from index 1 on get step 4
    assert [f.step for f in lm.forward_log] == [-1, 7, 4]


def test_serial_run_stamps_every_forward_with_its_step(tiny64):
    target, draft = CachedLM(tiny64.target), CachedLM(tiny64.draft, role="draft")
    out = generate(
        [5, 6, 7],
        target,
        ModelDrafter(draft, Fixed(3)),
        Tokenwise(),
        sampling=SAMPLING,
        coins=TorchCoins(0),
        max_new_tokens=10,
    )
    steps = [f.step for f in out.stats.forwards]
    assert sorted(set(steps)) == list(range(out.stats.target_forwards))
    assert all(f.lane == MAIN and f.end >= f.start > 0 for f in out.stats.forwards)
    targets = [f for f in out.stats.forwards if f.role == "target"]
    assert [f.step for f in targets] == list(range(out.stats.target_forwards))
    serial = sum(TABLE.cost(f.role, f.new_tokens, f.context) for f in out.stats.forwards)
    assert TABLE(out.stats.forwards) == pytest.approx(serial, rel=1e-12)


def _background_run(tiny64, seed: int):
    target = CachedLM(tiny64.target)
    drafter = BackgroundDrafter(
        CachedLM(tiny64.draft, role="draft"), CachedLM(tiny64.draft, role="draft"), Fixed(2)
    )
    out = generate(
        tiny64.tokenizer.encode("Hello there"),
        target,
        drafter,
        Tokenwise(),
        sampling=SAMPLING,
        coins=TorchCoins(seed),
        max_new_tokens=16,
    )
    return out


def test_background_drafter_logs_overlapped_forwards_and_prices_them_per_step(tiny64):
    out = _background_run(tiny64, seed=3)
    fw = out.stats.forwards
    worker = [f for f in fw if f.lane == "worker"]
    assert len(worker) == out.stats.target_forwards  # one guess per step, joined in its step
    assert [f.step for f in worker] == list(range(out.stats.target_forwards))
    assert all(f.end >= f.start for f in worker)
    # modeled time: the worker's forward hides behind the target's in every step
    per_step = {}
    for f in fw:
        key = "worker" if f.lane == "worker" else ("target" if f.role == "target" else "serial")
        per_step.setdefault(f.step, {}).setdefault(key, 0.0)
        per_step[f.step][key] += TABLE.cost(f.role, f.new_tokens, f.context)
    want = sum(s.get("serial", 0.0) + max(s["target"], s["worker"]) for s in per_step.values())
    assert TABLE(fw) == pytest.approx(want, rel=1e-12)
    assert TABLE(fw) < sum(TABLE.cost(f.role, f.new_tokens, f.context) for f in fw)
    counters = out.stats.counters
    assert counters["proposals"] == out.stats.target_forwards
    assert counters.get("ahead_hits", 0) + counters.get("ahead_misses", 0) == counters.get(
        "full_accepts", 0
    ) + sum(d == 0 for d in out.stats.drafted_per_step)


def test_background_randomness_is_reproducible(tiny64):
    # The worker draws from coins.fork(("ahead", step)): whatever the thread timing, two runs
    # with one seed give the same tokens and the same guesses (hence the same counters).
    a, b = _background_run(tiny64, seed=11), _background_run(tiny64, seed=11)
    assert a.tokens == b.tokens and a.stats.counters == b.stats.counters
    # and the guesses do not move the main stream: the emitted tokens equal a run without them
    target, draft = CachedLM(tiny64.target), CachedLM(tiny64.draft, role="draft")
    plain = generate(
        tiny64.tokenizer.encode("Hello there"),
        target,
        ModelDrafter(draft, Fixed(2)),
        Tokenwise(),
        sampling=SAMPLING,
        coins=TorchCoins(11),
        max_new_tokens=16,
    )
    assert plain.tokens == a.tokens
    assert torch.tensor(a.stats.accepted_per_step).sum() == plain.stats.accepted
