"""Sun et al. 2024 (Theorem 2): block verification accepts at least as much as tokenwise.

Checked exactly on 200 random context-dependent TableLM pairs: the exact expected number of tokens
one step emits (accepted + 1, i.e. the block efficiency of one target call) under ``Blockwise`` is
never below ``Tokenwise``'s on the same draft model, target and γ.
"""

from __future__ import annotations

from specdec.drafters import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.sampling import Sampling
from specdec.testing.step import expected_emitted, one_step
from specdec.testing.table_lm import TableLM
from specdec.verifiers import Blockwise, Tokenwise

PROMPT = [0, 1]


def instance(i: int) -> tuple[int, int, float, float]:
    """(V, γ, temperature, logit scale) of instance ``i``: a deterministic spread of settings."""
    vocab, gamma = [(2, 1), (2, 2), (2, 3), (3, 1), (3, 2)][i % 5]
    return vocab, gamma, [0.7, 1.0][(i // 5) % 2], [0.5, 1.5, 3.0][(i // 10) % 3]


def step_tokens(verifier, vocab, gamma, temperature, scale, seed) -> float:
    sampling = Sampling(temperature=temperature)
    target = TableLM(vocab, seed, scale=scale)
    draft = TableLM(vocab, seed + 7919, scale=scale, role="draft")
    drafter = ModelDrafter(draft, Fixed(gamma))
    return expected_emitted(one_step(target, drafter, verifier, PROMPT, sampling, gamma + 1))


def test_blockwise_accepts_at_least_tokenwise_on_200_instances():
    gains = []
    for i in range(200):
        vocab, gamma, temperature, scale = instance(i)
        tok = step_tokens(Tokenwise(), vocab, gamma, temperature, scale, seed=i)
        blk = step_tokens(Blockwise(), vocab, gamma, temperature, scale, seed=i)
        assert blk >= tok - 1e-12, (i, vocab, gamma, temperature, scale, blk, tok)
        gains.append(blk - tok)
    # γ = 1 makes the two rules identical; longer drafts must show a strict gain somewhere
    assert max(gains) > 1e-3
    assert all(abs(g) <= 1e-12 for i, g in enumerate(gains) if instance(i)[1] == 1)
