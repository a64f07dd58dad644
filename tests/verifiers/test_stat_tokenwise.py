"""Monte-Carlo check of the production path (TorchCoins) — the second layer after exact enumeration.

SpS with TorchCoins on TableLM (V=4, γ=2, T=1) samples the first L=2 tokens N times; the empirical
distribution must be close to the exact target joint. Bound (Bretagnolle–Huber–Carol): for k
outcomes, P(‖p̂ − p‖₁ ≥ λ) ≤ 2^k · exp(−N λ² / 2). With k = 16, N = 20 000 and false-failure
probability δ = 1e-6, λ = sqrt(2 (k ln 2 + ln(1/δ)) / N) ≈ 0.0499, i.e. TV ≤ 0.025. Fixed seeds.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from specdec.drafters import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.sampling import Sampling, TorchCoins
from specdec.testing.enumeration import total_variation
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Tokenwise

N, V, L, DELTA = 20_000, 4, 2, 1e-6


@pytest.mark.slow
def test_torchcoins_sps_matches_target_joint():
    sampling = Sampling(temperature=1.0)
    target, draft = TableLM(V, 11), TableLM(V, 12, role="draft")
    drafter = ModelDrafter(draft, Fixed(2))
    counts: Counter = Counter()
    for i in range(N):
        out = generate(
            [0, 1],
            target,
            drafter,
            Tokenwise(),
            sampling=sampling,
            coins=TorchCoins(i),
            max_new_tokens=L,
        )
        counts[tuple(out.tokens)] += 1
    empirical = {k: c / N for k, c in counts.items()}
    exact = ar_joint(target, [0, 1], L, sampling)
    lam = math.sqrt(2 * (V**L * math.log(2) + math.log(1 / DELTA)) / N)
    assert total_variation(empirical, exact) <= lam / 2
