"""Forward profiles: pricing a profile equals pricing its log; tables survive JSON."""

from __future__ import annotations

import json
import random

import pytest

from specdec.bench.pricing import CostTable, forward_profile, merge_profiles
from specdec.forwards import ForwardRecord

TABLE = CostTable(
    times={"target": {1: 0.030, 2: 0.034, 4: 0.045, 8: 0.050}, "draft": {1: 0.004, 16: 0.007}},
    slopes={"target": 3e-5, "draft": 1e-6},
    ref_context=128,
)


def _random_log(seed: int, length: int = 200) -> list[ForwardRecord]:
    rng = random.Random(seed)
    return [
        ForwardRecord(
            rng.choice(["target", "draft"]),
            rng.choice([1, 2, 3, 5, 8, 12, 40]),
            rng.randrange(20, 900),
            rng.random(),
        )
        for _ in range(length)
    ]


@pytest.mark.parametrize("seed", range(5))
def test_price_of_a_profile_equals_the_price_of_its_log(seed):
    log = _random_log(seed)
    assert TABLE.price(forward_profile(log)) == pytest.approx(TABLE(log), rel=1e-12)


def test_profiles_count_and_merge_like_concatenated_logs():
    a, b = _random_log(10, 50), _random_log(11, 70)
    merged = merge_profiles([forward_profile(a), forward_profile(b)])
    assert merged == forward_profile(a + b)
    assert sum(c for sizes in merged.values() for c, _ in sizes.values()) == 120
    small = forward_profile(
        [ForwardRecord("target", 2, 100, 0.0), ForwardRecord("target", 2, 140, 0.0)]
    )
    assert small == {"target": {"2": [2, 240]}}


def test_table_round_trips_through_json():
    again = CostTable.from_dict(json.loads(json.dumps(TABLE.to_dict())))
    assert again == TABLE
    log = _random_log(3)
    assert again(log) == TABLE(log)
