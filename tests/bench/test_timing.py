"""Timing quality of a run (specdec/bench/timing.py): each check on stand-in tables and loads.

Every table and load reading here is made up, so no verdict depends on this machine's speed.
"""

from __future__ import annotations

import json

import pytest

import specdec.bench.timing as timing
from specdec.bench.pricing import CostTable
from specdec.bench.run_summary import RunSummary
from specdec.bench.timing import TimingCheck

CAL = CostTable(times={"target": {1: 0.00015, 2: 0.00016, 3: 0.00017}}, ref_context=128)


def _table(times: dict[int, float]) -> dict:
    return CostTable(times={"target": times}, ref_context=128).to_dict()


def test_a_table_that_drops_with_size_is_a_reason_naming_the_sizes():
    # the audit: ar's 1-token target forward priced at 72 ms, larger ones at ~0.15 ms
    table = _table({1: 0.072, 2: 0.00016, 3: 0.00017})
    fit = {"fitted": {"target": {"1": 30}}, "monotone_violations": {"target": [2, 3]}}
    (reason,) = timing.table_reasons("tiny", table, fit)
    assert reason.startswith("tiny: target forward time drops as tokens grow (n=2 0.16 ms")
    assert "n=1 72 ms" in reason
    assert (
        timing.table_reasons(
            "tiny", _table({1: 1e-4, 2: 2e-4}), {"monotone_violations": {"target": []}}
        )
        == []
    )


def test_a_size_priced_at_zero_or_less_is_a_reason():
    table = _table({1: -0.0179, 2: 0.004})  # a negative context slope's fit (an old fixture)
    assert timing.table_reasons("tiny", table, {}) == [
        "tiny: target priced at zero or less for n=1"
    ]


def test_a_size_far_from_its_calibration_is_a_reason_within_the_ratio_is_not():
    fit = {"fitted": {"target": {"1": 30, "3": 12}}}
    far = timing.calibration_reasons("tiny", _table({1: 0.072, 3: 0.0002}), fit, CAL.to_dict())
    assert (
        len(far) == 1
        and "target n=1 took 72 ms in the run, 0.15 ms in the calibration" in far[0]
        and "(480x; limit 3x)" in far[0]
    )
    near = _table({1: 0.00015 * 2.9, 3: 0.00017 / 2.9})
    assert timing.calibration_reasons("tiny", near, fit, CAL.to_dict()) == []


def test_the_load_at_start_or_end_beyond_the_runs_threads_is_a_reason(monkeypatch):
    readings = iter([(1.9, 1.0, 0.5), (6.4, 5.0, 3.0)])
    monkeypatch.setattr(timing, "load_average", lambda: next(readings))
    monkeypatch.setattr(timing, "cores", lambda: 2)
    check = TimingCheck.begin(threads=2)
    assert check.reliable and check.load == [["start", 1.9, 1.0, 0.5]]  # 2 threads + 1: limit 3
    check.end()
    assert check.reasons == [
        "load average 6.40 at the end on 2 cores (limit 3: this run's 2 threads + 0.5 per core)"
    ]
    # a resumed run keeps its earlier readings: its forwards were timed under them too
    monkeypatch.setattr(timing, "load_average", lambda: (0.1, 0.1, 0.1))
    again = TimingCheck.begin(threads=2, previous=check)
    assert [r[0] for r in again.load] == ["start", "end", "start"] and not again.reliable


def test_two_runs_whose_calibrations_disagree_cannot_be_priced_together():
    slow = CostTable(times={"target": {n: 2 * t for n, t in CAL.times["target"].items()}})
    (reason,) = timing.paired_reasons(slow.to_dict(), CAL.to_dict(), "ar")
    assert reason == (
        "this run's calibration is 2x the `ar` run's (median over 3 sizes; limit 1.5x)"
    )
    close = CostTable(times={"target": {n: 1.4 * t for n, t in CAL.times["target"].items()}})
    assert timing.paired_reasons(close.to_dict(), CAL.to_dict(), "ar") == []
    assert timing.paired_reasons(None, CAL.to_dict(), "ar") == []  # an older run: nothing to say


def test_the_check_round_trips_through_the_summary_byte_for_byte():
    check = TimingCheck(
        table=["tiny: x"], paired=["y"], load=[["start", 0.5, 0.4, 0.3]], cores=2, threads=1
    )
    summary = RunSummary("sps", {}, timing=check)
    data = json.loads(json.dumps(summary.to_json()))
    assert data["timing"] == {
        "reliable": False,
        "reasons": ["tiny: x", "y"],
        "table": ["tiny: x"],
        "paired": ["y"],
        "load": [["start", 0.5, 0.4, 0.3]],
        "cores": 2,
        "threads": 1,
    }
    back = RunSummary.from_json(data)
    assert back.timing == check and back.to_json() == data


@pytest.mark.parametrize(
    ("value", "want"),
    [(None, True), ("strict", True), ("", True), ("lenient", False), (" Lenient ", False)],
)
def test_strict_is_the_default_and_lenient_keeps_the_numbers(monkeypatch, value, want):
    if value is None:
        monkeypatch.delenv(timing.ENV, raising=False)
    else:
        monkeypatch.setenv(timing.ENV, value)
    assert timing.strict() is want


def test_a_bad_mode_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv(timing.ENV, "loose")
    with pytest.raises(ValueError, match="SPECDEC_TIMING='loose': use strict .* or lenient"):
        timing.strict()
