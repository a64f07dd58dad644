"""Drafting through forks of the coins (``Coins.fork``) under the exact harness: a drafter whose
chain is drawn from a fork of ``ctx.coins`` keeps ``Tokenwise`` lossless to 1e-12 (whole loop and
one step), and the harness catches a forked draft recorded with the wrong q, forked draws that
escape the enumeration, and a drafter that reuses its fork key. The coins themselves:
``test_coins_fork.py``.
"""

from __future__ import annotations

import pytest
import torch

from specdec.core import Context, Draft, Drafter
from specdec.engine import generate
from specdec.sampling import Sampling, TorchCoins, fork_seed, warp
from specdec.testing.enumeration import EnumerationCoins, enumerate_outcomes, max_abs_error
from specdec.testing.step import complete, one_step
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import Tokenwise


class ForkingChainDrafter(Drafter):
    """Test double: drafts a γ-chain from a draft TableLM with draws from a fork of ``ctx.coins``.

    Its own step counter keys the forks (``("draft", step)``), as a background drafter's would.
    ``recorded`` maps the q a token was drawn from to the q put in the draft (identity here;
    planted bugs change it).
    """

    def __init__(self, lm: TableLM, gamma: int, sampling: Sampling, recorded=lambda q: q) -> None:
        self.lm, self.gamma, self.sampling, self.recorded = lm, gamma, sampling, recorded
        self.step = 0

    def reset(self) -> None:
        self.step = 0

    def propose(self, ctx: Context) -> Draft:
        coins = ctx.coins.fork(("draft", self.step))
        self.step += 1
        context, tokens, q_rows = ctx.tokens.tolist(), [], []
        for _ in range(min(self.gamma, ctx.budget - 1)):
            q = warp(self.lm.logits(tuple(context))[None], self.sampling)[0]  # [V]
            tokens.append(coins.categorical(q))
            q_rows.append(self.recorded(q))
            context.append(tokens[-1])
        q_rows.append(torch.zeros(self.lm.vocab_size, dtype=torch.float64))  # leaf row, unused
        return Draft.chain(ctx.root, torch.tensor(tokens, dtype=torch.long), torch.stack(q_rows))


class ForgetfulDrafter(ForkingChainDrafter):
    """Planted misuse: forks ``("draft", 0)`` at every step."""

    def propose(self, ctx: Context) -> Draft:
        self.step = 0
        return super().propose(ctx)


PROMPT = [0, 1]


def loop_error(
    drafter_cls, vocab: int, gamma: int, temperature: float, seed: int, **kwargs
) -> float:
    """Max error of the whole loop's law of γ+1 tokens against the target's AR joint."""
    sampling = Sampling(temperature=temperature)
    target = TableLM(vocab, seed)
    drafter = drafter_cls(TableLM(vocab, seed + 1000, role="draft"), gamma, sampling, **kwargs)

    def run(coins):
        out = generate(
            PROMPT,
            target,
            drafter,
            Tokenwise(),
            sampling=sampling,
            coins=coins,
            max_new_tokens=gamma + 1,
        )
        return tuple(out.tokens)

    got = enumerate_outcomes(run)
    assert abs(sum(got.values()) - 1.0) < 1e-12
    return max_abs_error(got, ar_joint(target, PROMPT, gamma + 1, sampling))


@pytest.mark.parametrize("vocab,gamma,temperature", [(2, 2, 1.0), (3, 2, 1.0), (2, 2, 0.0)])
def test_drafting_through_forks_keeps_tokenwise_lossless(vocab, gamma, temperature):
    assert loop_error(ForkingChainDrafter, vocab, gamma, temperature, seed=0) <= 1e-12


def test_drafting_through_forks_keeps_one_step_lossless():
    sampling = Sampling(temperature=1.0)
    target = TableLM(3, 4)
    drafter = ForkingChainDrafter(TableLM(3, 1004, role="draft"), 3, sampling)
    step = one_step(target, drafter, Tokenwise(), PROMPT, sampling, 4)
    got = complete(step, target, PROMPT, sampling, 4)
    assert max_abs_error(got, ar_joint(target, PROMPT, 4, sampling)) <= 1e-12


def test_harness_catches_a_forked_draft_recorded_with_the_wrong_q():
    """Planted bug: tokens drawn from q on a fork, but the draft records a uniform q."""
    err = loop_error(
        ForkingChainDrafter,
        2,
        2,
        1.0,
        seed=0,
        recorded=lambda q: torch.full_like(q, 1.0 / q.numel()),
    )
    assert err > 1e-3


def test_harness_catches_forked_draws_that_escape_enumeration(monkeypatch):
    """Planted harness bug: forks hand out production coins, so draft draws are not enumerated."""
    monkeypatch.setattr(EnumerationCoins, "fork", lambda self, key: TorchCoins(fork_seed(0, key)))
    assert loop_error(ForkingChainDrafter, 2, 2, 1.0, seed=0) > 1e-3


def test_harness_refuses_a_drafter_that_reuses_its_fork_key():
    with pytest.raises(ValueError, match="twice"):
        loop_error(ForgetfulDrafter, 2, 2, 1.0, seed=0)
