"""Cost model: table lookups, interpolation, serial sums, and calibration on the tiny pair."""

from __future__ import annotations

import pytest
import torch

from specdec.bench.run.calibration import CostTable, _time_forwards, calibrate
from specdec.drafters import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.forwards import ForwardRecord
from specdec.lm import CachedLM
from specdec.models.tiny import tiny_pair
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import Tokenwise


def test_table_interpolates_extrapolates_and_adds_serial_forwards():
    table = CostTable(
        times={"target": {1: 0.010, 2: 0.016, 4: 0.020}, "draft": {1: 0.001}},
        slopes={"target": 1e-5},
        ref_context=100,
    )
    assert table.cost("target", 2, 100) == pytest.approx(0.016)
    assert table.cost("target", 3, 100) == pytest.approx(0.018)  # linear between 2 and 4
    assert table.cost("target", 6, 100) == pytest.approx(0.024)  # extrapolated from 2..4
    assert table.cost("target", 1, 300) == pytest.approx(0.010 + 200 * 1e-5)
    assert table.cost("draft", 3, 100) == pytest.approx(0.003)  # one size: proportional
    log = [
        ForwardRecord("target", 2, 100, 9.9),
        ForwardRecord("draft", 1, 100, 9.9),
        ForwardRecord("draft", 1, 100, 9.9),
    ]
    assert table(log) == pytest.approx(0.016 + 0.002)  # measured seconds are not used
    with pytest.raises(ValueError, match="no calibration for role 'other'"):
        table([ForwardRecord("other", 1, 0, 0.0)])


def test_calibrate_tiny_pair_and_price_a_run():
    pair = tiny_pair()
    target, draft = CachedLM(pair.target), CachedLM(pair.draft, role="draft")
    table = calibrate(target, draft, max_new=3, repeats=2, ref_context=16, far_context=48)
    assert set(table.times) == {"target", "draft"}
    assert {1, 2, 3, 16, 256} <= set(table.times["target"])
    assert all(t > 0 for tab in table.times.values() for t in tab.values())
    # every size measured twice more, one half of its rounds each (2 repeats: one forward each)
    assert [set(h) for h in table.halves["target"]] == [set(table.times["target"])] * 2
    assert CostTable.from_dict(table.to_dict()) == table
    assert target.forward_log == [] and draft.forward_log == [] and target.ids == draft.ids == []
    sampling = Sampling(temperature=0.0)
    out = generate(
        pair.tokenizer.encode("hello world"),
        target,
        ModelDrafter(draft, Fixed(3)),
        Tokenwise(),
        sampling=sampling,
        coins=TorchCoins(0),
        max_new_tokens=10,
    )
    expected = sum(table.cost(f.role, f.new_tokens, f.context) for f in out.stats.forwards)
    assert table(out.stats.forwards) == pytest.approx(expected) and expected > 0
    with pytest.raises(ValueError, match="max_new and repeats"):
        calibrate(target, None, max_new=0)


def test_calibration_sizes_take_turns_so_a_slow_phase_hits_them_all():
    lm = CachedLM(tiny_pair().target)
    steps = []
    samples = _time_forwards(
        lm,
        torch.arange(1, 17),
        {1: 3, 2: 3, 16: 1},
        torch.Generator().manual_seed(0),
        other=lambda: steps.append(1),
    )
    sizes = [f.new_tokens for f in lm.forward_log[1:]]  # after the 16-token context
    assert sizes == [1, 2, 16, 1, 2, 16, 1, 2, 1, 2]  # round 0 warms up every size
    assert len(steps) == len(sizes) and {n: len(ts) for n, ts in samples.items()} == {
        1: 3,
        2: 3,
        16: 1,
    }
    timed = [f.seconds for f in lm.forward_log[1:] if f.new_tokens == 1][1:]
    assert samples[1] == timed  # in the order they were timed: the halves are first and last


def test_decoding_sizes_are_timed_apart_from_the_prefill_sizes(monkeypatch):
    import specdec.bench.run.calibration as cm

    calls: list[list[int]] = []
    real = cm._time_forwards

    def spy(lm, context, repeats, gen, other=None):
        calls.append(sorted(repeats))
        return real(lm, context, repeats, gen, other)

    monkeypatch.setattr(cm, "_time_forwards", spy)
    pair = tiny_pair()
    table = cm.calibrate(
        CachedLM(pair.target), None, max_new=3, repeats=2, ref_context=8, far_context=24
    )
    # a decoding forward never follows a prefill-sized one inside a timing loop
    assert calls == [[1, 2, 3], [16, 32, 64, 128, 256], [1]]
    assert set(table.times["target"]) == {1, 2, 3, 16, 32, 64, 128, 256}
    big = cm.calibrate(
        CachedLM(pair.target), None, max_new=300, repeats=1, ref_context=8, far_context=24
    )  # no prefill size left above max_new
    assert calls[-2:] == [list(range(1, 301)), [1]] and len(big.times["target"]) == 300
