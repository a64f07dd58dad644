"""Exact losslessness of every verifier on chains, multi-draft trees and top-k trees.

Two exact checks, both through ``engine.generate`` with TableLM target and draft and the
enumeration coins (draft randomness included):

* whole loop: the law of the first L generated tokens equals the target's autoregressive joint;
* one step + analytic completion (``testing.step``): cheaper, so it covers V=3 and γ=3.

A lossless verifier must match to 1e-12; ``Hierarchical("joint")`` is not lossless and is pinned in
test_verifiers_hsd.py instead. The big grids are ``slow``.
"""

from __future__ import annotations

import pytest

from specdec.engine import generate
from specdec.sampling import TorchCoins
from specdec.testing.draft_shapes import PROMPT, SHAPES, make
from specdec.testing.enumeration import enumerate_outcomes, max_abs_error
from specdec.testing.step import complete, one_step
from specdec.testing.table_lm import ar_joint
from specdec.verifiers import Blockwise, Hierarchical, RecursiveRejection, Tokenwise

LOSSLESS = {
    "rrs": RecursiveRejection,
    "blockwise": Blockwise,
    "hsd": Hierarchical,
}


def whole_loop_error(verifier, shape, vocab, gamma, temperature, seed) -> float:
    target, drafter, sampling = make(shape, vocab, gamma, temperature, seed)
    length = gamma + 1

    def run(coins):
        out = generate(
            PROMPT, target, drafter, verifier, sampling=sampling, coins=coins, max_new_tokens=length
        )
        assert len(out.tokens) == length
        return tuple(out.tokens)

    got = enumerate_outcomes(run)
    assert abs(sum(got.values()) - 1.0) < 1e-12
    return max_abs_error(got, ar_joint(target, PROMPT, length, sampling))


def step_error(verifier, shape, vocab, gamma, temperature, seed) -> float:
    target, drafter, sampling = make(shape, vocab, gamma, temperature, seed)
    step = one_step(target, drafter, verifier, PROMPT, sampling, gamma + 1)
    got = complete(step, target, PROMPT, sampling, gamma + 1)
    return max_abs_error(got, ar_joint(target, PROMPT, gamma + 1, sampling))


# --- whole loop ---------------------------------------------------------------------------------
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("shape", ["chain", "chain_point_mass", "multi2", "topk_tree"])
@pytest.mark.parametrize("name", sorted(LOSSLESS))
def test_verifier_is_lossless_through_the_loop(name, shape, temperature):
    assert LOSSLESS[name]().lossless
    err = whole_loop_error(LOSSLESS[name](), shape, 2, 2, temperature, seed=0)
    assert err <= 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("gamma", [1, 2, 3])
@pytest.mark.parametrize("vocab", [2, 3])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(LOSSLESS))
def test_verifier_is_lossless_through_the_loop_full_grid(
    name, shape, vocab, gamma, temperature, seed
):
    if shape == "multi3" and vocab * gamma > 6:
        pytest.skip("multi3 with V=3, γ≥3 enumerates too many drafts for the loop; see step grid")
    err = whole_loop_error(LOSSLESS[name](), shape, vocab, gamma, temperature, seed)
    assert err <= 1e-12


# --- one step + analytic completion -------------------------------------------------------------
DEFAULT_STEP = [
    ("chain", 3, 3, 0.7, 0),
    ("chain", 3, 2, 1.0, 1),
    ("chain_point_mass", 3, 3, 1.0, 2),
    ("multi2", 3, 2, 0.7, 3),
    ("multi3", 2, 2, 1.0, 4),
    ("topk_tree", 3, 3, 0.7, 5),
    ("topk_tree", 3, 3, 1.0, 6),
]


@pytest.mark.parametrize("case", DEFAULT_STEP, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("name", sorted(LOSSLESS))
def test_verifier_step_is_lossless(name, case):
    shape, vocab, gamma, temperature, seed = case
    assert step_error(LOSSLESS[name](), shape, vocab, gamma, temperature, seed) <= 1e-12


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
@pytest.mark.parametrize("gamma", [1, 2, 3])
@pytest.mark.parametrize("vocab", [2, 3])
@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(LOSSLESS))
def test_verifier_step_is_lossless_full_grid(name, shape, vocab, gamma, temperature, seed):
    if shape == "multi3" and vocab == 3 and gamma == 3:
        pytest.skip("27^3 draft triples: too many paths even for the step harness")
    err = step_error(LOSSLESS[name](), shape, vocab, gamma, temperature, seed)
    assert err <= 1e-12


# --- the harness can fail ---------------------------------------------------------------------
def test_harness_catches_siblings_tried_against_p(monkeypatch):
    """Planted bug: after a rejection the next sibling is tried against p, not the residual."""
    from specdec.verifiers import rrs

    real_rule = rrs.tokenwise_rule

    def rule_without_residual(tokens, p_rows, q_rows, coins):
        tau, dist = real_rule(tokens, p_rows, q_rows, coins)
        return tau, (p_rows[tau] if tau < len(tokens) else dist)

    monkeypatch.setattr(rrs, "tokenwise_rule", rule_without_residual)
    worst = max(step_error(RecursiveRejection(), "multi2", 3, 2, 1.0, seed) for seed in range(2))
    assert worst > 1e-3


def test_tokenwise_refuses_tree_drafters():
    target, drafter, sampling = make("multi2", 2, 2, 1.0, 0)
    with pytest.raises(ValueError, match="tree"):
        generate(
            PROMPT,
            target,
            drafter,
            Tokenwise(),
            sampling=sampling,
            coins=TorchCoins(0),
            max_new_tokens=3,
        )
