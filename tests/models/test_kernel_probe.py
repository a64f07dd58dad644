"""``linear_kernel: auto`` decided by a timed probe (specdec/models/kernel_probe.py).

Every timing here comes from an injected clock or stands-in timings, so the decisions are
deterministic; no test depends on how fast this machine is.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import specdec.models.kernel_decision as kd
import specdec.models.kernel_probe as kp
from specdec.models.kernels import PackedLinear
from specdec.models.tiny import tiny_pair


class KernelClock:
    """A clock whose timed passes cost ``costs[class of the watched layer]`` seconds each."""

    def __init__(self, watch: nn.Module, costs: dict[type, float]) -> None:
        self.watch, self.costs, self.now, self.calls = watch, costs, 0.0, 0

    def __call__(self) -> float:
        self.calls += 1
        if self.calls % 2 == 0:  # the read after a pass
            self.now += self.costs[type(self.watch)]
        return self.now


def small_model() -> nn.Sequential:
    """Three 8x8 layers (two of them timed, scaled by 3/2) and one 16x8 layer."""
    return nn.Sequential(
        nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 16, bias=False)
    )


def never(*_args) -> float:
    raise AssertionError("the probe ran although its result was cached")


@pytest.mark.parametrize(
    ("stock", "packed", "want"),
    [
        ({1: 10.0, 4: 12.0}, {1: 6.0, 4: 9.0}, "packed"),  # faster at every row count
        ({1: 10.0, 4: 12.0}, {1: 4.0, 4: 13.0}, "stock"),  # faster in total, 8% slower at 4 rows
        ({1: 10.0, 4: 12.0}, {1: 9.8, 4: 11.5}, "stock"),  # within the noise margin: keep stock
        ({1: 10.0, 4: 12.0}, {1: 10.0, 4: 12.0}, "stock"),  # a tie
        ({1: 10.0, 4: 12.0}, {1: 12.0, 4: 15.0}, "stock"),  # the Xeon case: packed slower
    ],
)
def test_decide_never_picks_a_kernel_slower_than_stock(stock, packed, want):
    assert kd.decide({"stock": stock, "packed": packed}) == want


def test_probe_times_every_kernel_and_row_count_with_the_injected_clock():
    model = small_model()
    clock = KernelClock(model[0], {nn.Linear: 0.25, PackedLinear: 0.125})  # exact in binary
    passes = kp.probe(kp.linear_layers([model, model]), clock=clock)
    # per pass: the 8x8 shape's cost scaled by 3 layers / 2 timed, plus the 16x8 shape's
    assert kd.best(passes) == {"stock": {1: 625.0, 4: 625.0}, "packed": {1: 312.5, 4: 312.5}}
    assert kd.spread(passes) == 0.0  # a steady clock: REPEATS passes are enough
    # two reads per shape and pass; one untimed and REPEATS timed passes per kernel and row count
    assert clock.calls == 2 * 2 * len(kp.CANDIDATES) * len(kp.ROWS) * (kp.REPEATS + 1)
    assert [type(m) for m in model] == [PackedLinear, PackedLinear, nn.Linear, PackedLinear]


@pytest.mark.parametrize(
    ("costs", "want"),
    [
        ({nn.Linear: 0.010, PackedLinear: 0.004}, "packed"),
        ({nn.Linear: 0.004, PackedLinear: 0.010}, "stock"),
    ],
)
def test_auto_probes_once_per_machine_and_shapes_then_reads_the_cache(
    tmp_path, monkeypatch, costs, want
):
    monkeypatch.setattr(kp, "PROBE_MIN_BYTES", 0)
    model = small_model()
    first = kp.choose_linear_kernel(
        "auto", [model], cache_dir=tmp_path, clock=KernelClock(model[0], costs)
    )
    assert first.kernel == want and first.note.startswith("probe: stock 1:")
    (entry,) = json.loads((tmp_path / kp.CACHE_FILE).read_text()).values()
    assert entry["kernel"] == want and entry["torch"] == torch.__version__
    assert (
        kp.choose_linear_kernel("auto", [small_model()], cache_dir=tmp_path, clock=never) == first
    )
    # other shapes are another entry: probed again
    wider = nn.Sequential(nn.Linear(8, 32))
    kp.choose_linear_kernel("auto", [wider], cache_dir=tmp_path, clock=KernelClock(wider[0], costs))
    assert len(json.loads((tmp_path / kp.CACHE_FILE).read_text())) == 2


def test_a_corrupt_cache_is_probed_again_and_rewritten(tmp_path, monkeypatch):
    monkeypatch.setattr(kp, "PROBE_MIN_BYTES", 0)
    (tmp_path / kp.CACHE_FILE).parent.mkdir(parents=True)
    (tmp_path / kp.CACHE_FILE).write_text("{not json")
    model = small_model()
    clock = KernelClock(model[0], {nn.Linear: 0.004, PackedLinear: 0.010})
    choice = kp.choose_linear_kernel("auto", [model], cache_dir=tmp_path, clock=clock)
    assert choice.kernel == "stock"
    assert len(json.loads((tmp_path / kp.CACHE_FILE).read_text())) == 1


def test_only_plain_linear_layers_are_probed_and_shared_ones_once():
    class Quantized(nn.Linear):  # another library's layer: its own forward, never swapped
        pass

    shared = nn.Linear(4, 4)
    found = kp.linear_layers(
        [nn.Sequential(Quantized(4, 4), shared), None, nn.Sequential(shared, nn.Linear(4, 2))]
    )
    assert [(m.out_features, type(m)) for m in found] == [(4, nn.Linear), (2, nn.Linear)]


def test_given_kernels_small_models_and_other_devices_are_not_probed(tmp_path):
    model = small_model()
    assert kp.choose_linear_kernel(
        "stock", [model], cache_dir=tmp_path, clock=never
    ) == kp.KernelChoice("stock")
    small = kp.choose_linear_kernel("auto", [model], cache_dir=tmp_path, clock=never)
    assert small.kernel == kp.SKIPPED and small.note.startswith("not probed: 0.0 MiB")
    with torch.device("meta"):
        elsewhere = small_model()
    assert kp.choose_linear_kernel("auto", [elsewhere], clock=never) == kp.KernelChoice("stock")
    assert not (tmp_path / kp.CACHE_FILE).exists()


def test_the_pair_records_the_measured_choice_and_its_timings(tmp_path, monkeypatch):
    monkeypatch.setattr(kp, "PROBE_MIN_BYTES", 0)
    monkeypatch.setenv("SPECDEC_CACHE_DIR", str(tmp_path))
    passes = {"stock": {1: [1.0, 1.0], 4: [2.0, 2.0]}, "packed": {1: [3.0, 3.0], 4: [4.0, 4.0]}}
    monkeypatch.setattr(kp, "probe", lambda linears, clock: passes)
    pair = tiny_pair()
    described = pair.describe()
    assert described["linear_kernel"] == "stock"
    want = "probe: stock 1:1.00 4:2.00 | packed 1:3.00 4:4.00 ms"
    assert described["linear_kernel_probe"] == want
    assert described["attention"] == "sdpa"  # stock leaves the models as loaded
    assert {type(m) for m in pair.target.modules() if isinstance(m, nn.Linear)} == {nn.Linear}
    assert tiny_pair().describe() == described  # the next load reads the same record


class NoisyClock(KernelClock):
    """A ``KernelClock`` on a loaded machine: each timed pass costs twice the one before it (the
    same for both kernels), so the best two passes of a kernel always differ by 100 %."""

    def __call__(self) -> float:
        self.calls += 1
        if self.calls % 2 == 0:
            self.now += self.costs[type(self.watch)] * 2.0 ** (self.calls // 2)
        return self.now


def test_a_probe_on_a_noisy_clock_repeats_then_keeps_stock_and_caches_nothing(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(kp, "PROBE_MIN_BYTES", 0)
    model = small_model()
    # packed is 2.5x faster per pass: a steady clock picks it (next test)
    clock = NoisyClock(model[0], {nn.Linear: 0.010, PackedLinear: 0.004})
    with caplog.at_level("WARNING", logger=kp.__name__):
        choice = kp.choose_linear_kernel("auto", [model], cache_dir=tmp_path, clock=clock)
    assert choice.kernel == "stock" and choice.note.startswith("probe unstable (")
    assert not (tmp_path / kp.CACHE_FILE).exists()  # the next load probes again
    assert "-> stock for this run, not cached" in caplog.text
    # bounded: one untimed and MAX_REPEATS timed passes per row count, two reads per shape
    assert clock.calls == 2 * 2 * len(kp.CANDIDATES) * len(kp.ROWS) * (kp.MAX_REPEATS + 1)


def test_a_probe_on_a_steady_clock_decides_and_caches(tmp_path, monkeypatch):
    monkeypatch.setattr(kp, "PROBE_MIN_BYTES", 0)
    model = small_model()
    clock = KernelClock(model[0], {nn.Linear: 0.010, PackedLinear: 0.004})
    choice = kp.choose_linear_kernel("auto", [model], cache_dir=tmp_path, clock=clock)
    assert choice.kernel == "packed" and choice.note.startswith("probe: stock 1:")
    (entry,) = json.loads((tmp_path / kp.CACHE_FILE).read_text()).values()
    assert entry["kernel"] == "packed"
    assert clock.calls == 2 * 2 * len(kp.CANDIDATES) * len(kp.ROWS) * (kp.REPEATS + 1)


def test_the_spread_is_the_worst_gap_between_the_best_two_passes():
    passes = {
        "stock": {1: [10.0, 10.4, 30.0], 4: [20.0, 20.0]},
        "packed": {1: [5.0, 6.0], 4: [8.0, 8.2]},
    }
    assert kd.spread(passes) == pytest.approx(0.2)  # packed at 1 row: 6 vs 5
    assert kd.best(passes) == {"stock": {1: 10.0, 4: 20.0}, "packed": {1: 5.0, 4: 8.0}}
    assert kd.spread({"stock": {1: [3.0]}, "packed": {1: [1.0, 1.0]}}) == float("inf")
