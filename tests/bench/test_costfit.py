"""The cost table fitted on a run's own forward log (specdec.bench.costfit)."""

from __future__ import annotations

import random

import pytest

from specdec.bench.costfit import fit_cost_table, log_columns, log_rows, monotone_violations
from specdec.bench.pricing import CostTable
from specdec.forwards import ForwardRecord

TRUE_T = {"target": {1: 0.025, 5: 0.027}, "draft": {1: 0.003}}
TRUE_S = {"target": 2e-5, "draft": 4e-6}


def _log(seed: int, steps: int = 400, outliers: int = 0) -> list[ForwardRecord]:
    """A synthetic sps-like log from the true table, 5 % multiplicative noise, 1-in-`outliers`
    forwards 40x slow (a scheduler hiccup)."""
    rng, out = random.Random(seed), []
    for step in range(steps):
        ctx = 50 + step
        for role, n in [("draft", 1)] * 4 + [("target", 5)] + ([("target", 1)] if step % 3 else []):
            t = (TRUE_T[role][n] + TRUE_S[role] * (ctx - 100)) * rng.uniform(0.95, 1.05)
            if outliers and rng.randrange(outliers) == 0:
                t *= 40
            out.append(ForwardRecord(role, n, ctx, t, step=step))
    return out


def test_columns_round_trip_the_forwards_a_record_keeps():
    log = [
        ForwardRecord("draft", 1, 10, 0.0031234567, step=0),
        ForwardRecord("target", 5, 11, 0.025, lane="main", step=0),
        ForwardRecord("draft", 2, 12, 0.004, lane="bg", step=1),
    ]
    back = log_rows(log_columns(log))
    assert [(f.role, f.new_tokens, f.context, f.lane, f.step) for f in back] == [
        (f.role, f.new_tokens, f.context, f.lane, f.step) for f in log
    ]
    assert [f.seconds for f in back] == pytest.approx([f.seconds for f in log], abs=1e-6)


def test_fit_recovers_the_table_and_the_context_slope():
    table, report = fit_cost_table([_log(0), _log(1)], ref_context=100)
    for role, sizes in TRUE_T.items():
        for n, t in sizes.items():
            assert table.base(role, n) == pytest.approx(t, rel=0.01)
        assert table.slopes[role] == pytest.approx(TRUE_S[role], rel=0.05)
    assert report["fitted"]["target"] == {"1": 532, "5": 800}
    assert report["monotone_violations"] == {"draft": [], "target": []}


def test_modeled_time_adds_up_to_the_forwards_including_a_heavy_tail():
    # a mean, not a median: a loaded machine's slow forwards are part of what the run took
    log = _log(2, outliers=25)
    table, _ = fit_cost_table([log])
    measured = sum(f.seconds for f in log)
    assert table(log) == pytest.approx(measured, rel=1e-6)
    median_table, _ = fit_cost_table([log], trim=0.49)  # ~median: misses the tail
    assert median_table(log) < 0.8 * measured


def test_sizes_the_run_never_made_come_from_the_calibration_rescaled_to_the_run():
    slow = CostTable(
        times={"target": {1: 0.25, 2: 0.26, 5: 0.27, 64: 1.0}, "draft": {1: 0.03, 8: 0.05}},
        ref_context=100,
    )  # 10x slow phase
    log = [f for f in _log(3) if not (f.role == "target" and f.new_tokens == 1)]
    table, report = fit_cost_table([log], slow)
    assert report["calibrated"] == {"target": [1, 2, 64], "draft": [8]}
    assert report["calibration_scale"]["target"] == pytest.approx(0.1, rel=0.02)
    assert table.base("target", 1) == pytest.approx(0.025, rel=0.03)  # not 0.25
    assert table.base("target", 5) == pytest.approx(0.027, rel=0.01)  # fitted


def test_a_table_that_gets_cheaper_with_size_is_flagged():
    assert monotone_violations({1: 0.025, 2: 0.026, 3: 0.020, 4: 0.0255}) == [3]
    assert monotone_violations({1: 0.025, 2: 0.024, 8: 0.03}) == []  # within 10 %


def test_a_drop_within_the_noise_of_two_fitted_means_is_not_a_violation():
    table = {1: 0.025, 2: 0.021}  # 16 % cheaper at 2 tokens
    assert monotone_violations(table) == [2]  # nothing known of the noise: flagged
    assert monotone_violations(table, {1: 0.002, 2: 0.001}) == []  # 3 errors = 6.7 ms > 4 ms
    assert monotone_violations(table, {1: 0.0005, 2: 0.0005}) == [2]  # 2.1 ms < 4 ms: a drop
    assert monotone_violations(table, {1: 0.002}) == [2]  # size 2 calibrated: tolerance only


def test_the_fit_reports_each_fitted_sizes_standard_error():
    log = _log(4)
    _, report = fit_cost_table([log], ref_context=100)
    err = report["stderr"]["target"]["5"]
    # 5 % uniform noise on ~27 ms over 400 forwards (plus the spread of the context slope)
    assert 0.0 < err < 0.027 * 0.05
    assert set(report["stderr"]["target"]) == set(report["fitted"]["target"])


def test_no_forwards_and_no_calibration_is_an_error():
    with pytest.raises(ValueError, match="no forwards"):
        fit_cost_table([[]])


def _records(log: list[ForwardRecord], prompts: int = 4) -> list[dict]:
    """``log`` split into ``prompts`` records the way the runner stores them."""
    k = -(-len(log) // prompts)  # ceil: every forward in some record
    return [{"forward_log": log_columns(log[i * k : (i + 1) * k])} for i in range(prompts)]


def test_each_dataset_is_priced_at_the_speed_it_ran_at():
    # the first dataset decoded on a quiet machine, the second while a job made every forward 6x
    # slower: one run-wide table would price the quiet one ~3.5x above what it took, the loaded one
    # ~0.6x; per-dataset tables give each what its forwards took
    from specdec.bench.run.summary import price_run
    from specdec.bench.run_summary import RunSummary

    quiet = _log(3)
    loaded = [
        ForwardRecord(f.role, f.new_tokens, f.context, 6 * f.seconds, step=f.step) for f in _log(4)
    ]
    records = {"quiet": _records(quiet), "loaded": _records(loaded)}
    calibration = CostTable({"target": {1: 0.03, 5: 0.03, 8: 0.04}, "draft": {1: 0.003}}, {}, 100)
    summary = RunSummary("sps", {"quiet": {}, "loaded": {}}, overall={})
    price_run(summary, records, calibration)
    for name, log in (("quiet", quiet), ("loaded", loaded)):
        measured = sum(f.seconds for f in log)
        assert summary.datasets[name]["modeled_s"] == pytest.approx(measured, rel=1e-3)
        assert set(summary.cost_tables[name]["times"]) == {"target", "draft"}
    run_wide = CostTable.from_dict(summary.cost_table)
    assert run_wide(quiet) > 2 * sum(f.seconds for f in quiet)  # what the old pricing did
    assert summary.overall["modeled_s"] == pytest.approx(
        sum(f.seconds for f in quiet + loaded), rel=1e-3
    )
    assert summary.cost_table_monotone is True
