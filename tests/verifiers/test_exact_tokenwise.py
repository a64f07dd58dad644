"""Exact losslessness of SpS (chain drafter + tokenwise verifier) through the whole decoding loop.

The draft is sampled through the enumeration coins too, so the enumerated distribution of the first
L emitted tokens covers draft and verification randomness; it must equal the target's
autoregressive joint to 1e-12.
"""

from __future__ import annotations

import pytest
import torch

from specdec.drafters import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.sampling import Sampling
from specdec.testing.enumeration import enumerate_outcomes, max_abs_error
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Tokenwise, tokenwise

PROMPT = [0, 1]


def method_distribution(
    verifier, *, vocab: int, gamma: int, temperature: float, seed: int, length: int
) -> dict:
    target = TableLM(vocab, seed)
    draft = TableLM(vocab, seed + 1000, role="draft")
    sampling = Sampling(temperature=temperature)
    drafter = ModelDrafter(draft, Fixed(gamma))

    def run(coins):
        out = generate(
            PROMPT, target, drafter, verifier, sampling=sampling, coins=coins, max_new_tokens=length
        )
        assert len(out.tokens) == length
        return tuple(out.tokens)

    return enumerate_outcomes(run)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("gamma", [1, 2, 3])
@pytest.mark.parametrize("vocab", [2, 3])
def test_tokenwise_sps_is_lossless(vocab, gamma, temperature, seed):
    length = max(3, gamma + 1)  # the full draft is used, and γ=1 spans several steps
    got = method_distribution(
        Tokenwise(), vocab=vocab, gamma=gamma, temperature=temperature, seed=seed, length=length
    )
    want = ar_joint(TableLM(vocab, seed), PROMPT, length, Sampling(temperature=temperature))
    assert abs(sum(got.values()) - 1.0) < 1e-12
    assert max_abs_error(got, want) <= 1e-12


@pytest.mark.parametrize(
    "bug",
    [
        # the residual without the positive part: |p - q| instead of max(p - q, 0)
        lambda p, q, x: (p - q).abs() / (p - q).abs().sum(),
        # resampling from the target instead of the residual
        lambda p, q, x: p,
    ],
    ids=["abs-residual", "resample-from-p"],
)
def test_harness_catches_a_planted_residual_bug(monkeypatch, bug):
    """A harness that cannot fail is worthless: a wrong residual must give a visible error."""
    monkeypatch.setattr(tokenwise, "residual", bug)
    worst = 0.0
    for seed in range(3):
        got = method_distribution(
            Tokenwise(), vocab=3, gamma=2, temperature=1.0, seed=seed, length=3
        )
        want = ar_joint(TableLM(3, seed), PROMPT, 3, Sampling(temperature=1.0))
        worst = max(worst, max_abs_error(got, want))
    assert worst > 1e-3


def test_point_mass_draft_is_lossless():
    """q=None (deterministic proposals) is verified as a point mass: still exact."""

    class PointMass(ModelDrafter):
        def propose(self, ctx):
            d = super().propose(ctx)
            return type(d)(d.tokens, d.parent, None)

    target = TableLM(3, 5)
    sampling = Sampling(temperature=1.0)
    drafter = PointMass(TableLM(3, 6, role="draft"), Fixed(2))

    def run(coins):
        return tuple(
            generate(
                PROMPT,
                target,
                drafter,
                Tokenwise(),
                sampling=sampling,
                coins=coins,
                max_new_tokens=3,
            ).tokens
        )

    got = enumerate_outcomes(run)
    want = ar_joint(target, PROMPT, 3, sampling)
    assert max_abs_error(got, want) <= 1e-12


def test_enumeration_probabilities_are_exact_for_a_known_case():
    """Bernoulli(0.3) then categorical: the harness returns exactly the product probabilities."""

    def run(coins):
        a = coins.bernoulli(0.3)
        b = coins.categorical(torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64))
        return (a, b)

    dist = enumerate_outcomes(run)
    assert len(dist) == 6
    assert dist[(True, 0)] == pytest.approx(0.15, abs=1e-15)
    assert dist[(False, 2)] == pytest.approx(0.175, abs=1e-15)
