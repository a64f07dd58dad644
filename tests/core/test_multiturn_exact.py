"""Lossless over a whole conversation: the turns of a multi-turn prompt draw from their own streams.

The drafters that work in the background key their forks by step and context length
(``("pearl", step, len)``, ``("ssd", ...)``, ``("specbranch", ...)``). Two turns of one prompt can
have the same length (``truncate_prompts=left`` cuts every long turn to one length); with one coin
stream for the conversation, turn 2's worker would re-draw turn 1's numbers and the joint law of
the two answers would not be the target's. ``sampling.turn_coins`` gives each turn its own child
stream, as ``bench.method.run_prompt`` does. Exact enumeration (tiny float64 table LMs, T = 1, two
turns of equal length: turn 2's prompt is the conversation's last ``len(PROMPT)`` tokens) must give
``P(a1) * P(a2 | prompt2(a1))``; and one stream for both turns must be refused, not silently reused.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from specdec.bench.run import method as method_mod
from specdec.drafters.pearl import PearlDrafter
from specdec.drafters.policies import Fixed
from specdec.drafters.specbranch import SpecBranchDrafter
from specdec.drafters.ssd import SsdDrafter
from specdec.engine import generate
from specdec.sampling import Sampling, TorchCoins, turn_coins
from specdec.testing.enumeration import enumerate_outcomes, total_variation
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.verifiers import RecursiveRejection, Tokenwise

PROMPT, VOCAB, TARGET_SEED = [0, 1], 2, 7
SAMPLING = Sampling(temperature=1.0)

#: name -> (drafter and verifier builder, tokens per turn: enough for the worker to fork)
DRAFTERS: dict[str, tuple[Callable[[], tuple], int]] = {
    "pearl": (
        lambda: (
            PearlDrafter(TableLM(VOCAB, TARGET_SEED + 1, role="draft"), Fixed(2), mode="inline"),
            Tokenwise(),
        ),
        3,
    ),
    "ssd": (
        lambda: (
            SsdDrafter(
                TableLM(VOCAB, TARGET_SEED + 1, role="draft"),
                Fixed(2),
                budget=2,
                saguaro_c=0.5,
                mode="inline",
            ),
            Tokenwise(),
        ),
        3,
    ),
    "specbranch": (
        lambda: (
            SpecBranchDrafter(
                TableLM(VOCAB, TARGET_SEED + 1, role="draft"),
                Fixed(1),
                threshold=0.95,
                k_max=2,
                mode="inline",
            ),
            RecursiveRejection(),
        ),
        4,
    ),
}


def second_prompt(first: tuple[int, ...]) -> list[int]:
    """Turn 2's prompt: the conversation so far cut on the left to turn 1's length."""
    return (PROMPT + list(first))[-len(PROMPT) :]


def conversation_law(target: TableLM, length: int) -> dict[tuple, float]:
    """The target's exact law of (answer 1, answer 2)."""
    law: dict[tuple, float] = {}
    for a1, p1 in ar_joint(target, PROMPT, length, SAMPLING).items():
        for a2, p2 in ar_joint(target, second_prompt(a1), length, SAMPLING).items():
            law[(a1, a2)] = p1 * p2
    return law


def converse(drafter, verifier, target: TableLM, coins, length: int, *, per_turn: bool) -> tuple:
    """Two turns on one prompt's coins: each turn on its own stream, or both on the root."""
    answers: list[tuple[int, ...]] = []
    for i in range(2):
        ids = PROMPT if i == 0 else second_prompt(answers[0])
        out = generate(
            ids,
            target,
            drafter,
            verifier,
            sampling=SAMPLING,
            coins=turn_coins(coins, i) if per_turn else coins,
            max_new_tokens=length,
        )
        answers.append(tuple(out.tokens))
    return tuple(answers)


@pytest.mark.parametrize("name", sorted(DRAFTERS))
def test_two_turns_of_equal_length_keep_the_targets_joint_law(name):
    build, length = DRAFTERS[name]
    drafter, verifier = build()
    target = TableLM(VOCAB, TARGET_SEED)
    got = enumerate_outcomes(
        lambda coins: converse(drafter, verifier, target, coins, length, per_turn=True)
    )
    assert abs(sum(got.values()) - 1.0) < 1e-12
    assert total_variation(got, conversation_law(target, length)) <= 1e-12


@pytest.mark.parametrize("name", sorted(DRAFTERS))
def test_one_stream_for_both_turns_repeats_a_fork_key_and_is_refused(name):
    # The defect the per-turn streams fix: the workers' keys recur in turn 2. The harness and the
    # production coins both refuse the second fork instead of handing out the same numbers.
    build, length = DRAFTERS[name]
    drafter, verifier = build()
    target = TableLM(VOCAB, TARGET_SEED)
    with pytest.raises(ValueError, match="twice"):
        enumerate_outcomes(
            lambda coins: converse(drafter, verifier, target, coins, length, per_turn=False)
        )
    drafter, verifier = build()
    with pytest.raises(ValueError, match="twice"):
        for seed in range(20):  # some seed makes a worker fork at one (step, length) in both turns
            converse(drafter, verifier, target, TorchCoins(seed), length, per_turn=False)


def test_production_coins_refuse_a_key_forked_twice():
    coins = TorchCoins(3)
    coins.fork(("pearl", 0, 5))
    coins.fork(("pearl", 1, 5))  # another key: fine
    with pytest.raises(ValueError, match="twice"):
        coins.fork(("pearl", 0, 5))
    # a child may reuse its parent's key names: it is another stream
    coins.fork("turn").fork(("pearl", 0, 5))


def test_run_prompt_gives_each_turn_its_own_stream(tiny64, monkeypatch):
    """``run_prompt`` hands ``generate`` a distinct child stream per turn of one prompt."""
    from specdec.data.prompts import Prompt

    seeds: list[int] = []
    real = method_mod.generate

    def recording(*args, coins, **kwargs):
        seeds.append(coins.seed)
        return real(*args, coins=coins, **kwargs)

    monkeypatch.setattr(method_mod, "generate", recording)
    pair = tiny64
    method = method_mod.Method(
        method_mod.CachedLM(pair.target, role="target"), _empty_drafter(), Tokenwise(), SAMPLING
    )
    prompt = Prompt(id="p0", dataset="tiny", category="tiny", turns=("hello", "hello"))
    method_mod.run_prompt(prompt, pair, method, seed=0, max_new_tokens=3, chat_template=False)
    assert len(seeds) == 2 and len(set(seeds)) == 2
    root = TorchCoins(method_mod.prompt_seed(0, "p0"))
    assert seeds == [turn_coins(root, 0).seed, turn_coins(root, 1).seed]


def _empty_drafter():
    from specdec.drafters import EmptyDrafter

    return EmptyDrafter()


def test_turn_coins_are_reproducible_and_independent_of_the_parents_position():
    a, b = TorchCoins(9), TorchCoins(9)
    b.categorical(torch.tensor([0.5, 0.5], dtype=torch.float64))  # moves b's own stream only
    assert turn_coins(a, 1).seed == turn_coins(b, 1).seed != turn_coins(TorchCoins(9), 0).seed
