"""Forkable randomness (``Coins.fork``): reproducible child streams for background drafting.

Production (``TorchCoins``): a child's draws depend only on the parent's seed and the key, never
on the parent's position or on thread timing, and drawing from a child never moves the parent.
Harness (``EnumerationCoins``): forked draws are enumerated in the same path as the parent's; a
key forked twice and a nondeterministic call order are refused (drafting through forks:
``test_fork_drafting.py``). Every draw uses a fixed seed; statistical claims state their odds.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
import torch

from specdec.sampling import TorchCoins, canonical_key, fork_seed
from specdec.testing.enumeration import EnumerationCoins, enumerate_outcomes, max_abs_error
from specdec.testing.step import _FreezableCoins

UNIFORM = torch.full((1000,), 1e-3, dtype=torch.float64)  # [1000]


def draws(coins: TorchCoins, n: int = 40) -> list[int]:
    """``n`` categorical draws over 1000 equally likely values, then one bernoulli."""
    return [coins.categorical(UNIFORM) for _ in range(n)] + [int(coins.bernoulli(0.5))]


# --- TorchCoins -------------------------------------------------------------------------------
def test_child_ignores_how_far_the_parent_has_drawn():
    fresh, used = TorchCoins(7), TorchCoins(7)
    for _ in range(100):
        used.categorical(UNIFORM)
    assert draws(fresh.fork(("draft", 0))) == draws(used.fork(("draft", 0)))


def test_same_key_gives_the_same_stream_and_child_never_moves_parent():
    parent, twin, untouched = TorchCoins(11), TorchCoins(11), TorchCoins(11)
    first, second = parent.fork((3, "guess", 2)), twin.fork((3, "guess", 2))
    assert first.seed == second.seed
    assert draws(first) == draws(second)
    assert draws(parent) == draws(untouched)
    # the same key a second time on one stream would repeat those draws: refused
    with pytest.raises(ValueError, match="twice"):
        parent.fork((3, "guess", 2))


def test_different_keys_give_different_streams():
    # Independent streams agree on 40 uniform draws over 1000 values with probability 1e-120 per
    # pair; with 45 pairs the false-failure probability is below 1e-117.
    keys = [0, 1, "0", (0,), (0, 0), ("draft", 0), ("draft", 1), ("verify", 0), None, True]
    streams = [tuple(draws(TorchCoins(5).fork(k))) for k in keys]
    assert len(set(streams)) == len(keys)
    assert tuple(draws(TorchCoins(5))) not in streams  # a child is not its parent either


def test_fork_of_fork_is_deterministic():
    a = TorchCoins(2).fork("a").fork(("b", 1))
    b = TorchCoins(2).fork("a").fork(("b", 1))
    assert draws(a) == draws(b)
    # false-failure probability 1e-120 (independent streams agreeing), as above
    assert draws(TorchCoins(2).fork("a").fork(("b", 2))) != draws(a)


def test_fork_seed_is_pinned_across_processes_and_versions():
    # Python's hash() of a str is salted per process, so a derivation through it could not pin a
    # constant; changing the derivation silently changes every stored run with forked draws.
    assert fork_seed(5, ("draft", 3)) == 7504983548096004343
    assert TorchCoins(5).fork(("draft", 3)).seed == fork_seed(5, ("draft", 3))


def test_canonical_key_tells_look_alike_keys_apart():
    keys = [
        0,
        1,
        -1,
        2**70,
        "1",
        "",
        True,
        False,
        None,
        (),
        (1,),
        ((1,),),
        ("a", 1),
        ("a", "1"),
        ("a,1",),
        ("a", (1, 2)),
        (("a", 1), 2),
    ]
    assert len({canonical_key(k) for k in keys}) == len(keys)
    assert len({fork_seed(0, k) for k in keys}) == len(keys)


@pytest.mark.parametrize(
    "key",
    [torch.tensor(1), 1.5, ("step", 0.5), [1, 2], b"raw", frozenset({1})],
    ids=["tensor", "float", "tuple-with-float", "list", "bytes", "frozenset"],
)
def test_keys_without_a_stable_encoding_are_refused(key):
    with pytest.raises(TypeError, match="int, str, bool, None or tuples"):
        TorchCoins(0).fork(key)
    with pytest.raises(TypeError, match="int, str, bool, None or tuples"):
        EnumerationCoins([]).fork(key)  # the harness refuses what production refuses


def test_children_drawn_in_threads_match_sequential_draws():
    # Threads start at seeded random moments of the parent's loop and sleep at seeded random
    # moments, so OS scheduling interleaves their draws with the parent's and with each other.
    schedule = random.Random(0)
    starts = sorted(schedule.sample(range(200), 8))
    naps = {i: [schedule.random() * 1e-3 for _ in range(40)] for i in range(8)}
    parent, results, threads = TorchCoins(123), {}, []

    def background(child: TorchCoins, i: int) -> None:
        out = []
        for nap in naps[i]:
            time.sleep(nap)
            out.append(child.categorical(UNIFORM))
        results[i] = out

    parent_draws = []
    for t in range(200):
        while len(threads) < len(starts) and starts[len(threads)] == t:
            i = len(threads)
            threads.append(threading.Thread(target=background, args=(parent.fork(("bg", i)), i)))
            threads[-1].start()
        parent_draws.append(parent.categorical(UNIFORM))
        time.sleep(schedule.random() * 1e-4)
    for thread in threads:
        thread.join()
    sequential = TorchCoins(123)
    for i in range(8):
        replay = sequential.fork(("bg", i))
        assert results[i] == [replay.categorical(UNIFORM) for _ in range(40)], f"thread {i}"
    assert parent_draws == [sequential.categorical(UNIFORM) for _ in range(200)]


# --- the enumeration harness through forks ------------------------------------------------------
def test_forked_draws_multiply_into_the_parent_path():
    p = torch.tensor([0.2, 0.8], dtype=torch.float64)  # [2]
    r = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)  # [3]

    def fn(coins):
        a = coins.categorical(p)
        child = coins.fork("a")
        b = child.categorical(r)
        c = child.fork(("b", 1)).bernoulli(0.3)  # a grandchild
        return a, b, c, coins.bernoulli(0.6)

    want = {
        (a, b, c, d): float(p[a] * r[b]) * (0.3 if c else 0.7) * (0.6 if d else 0.4)
        for a in range(2)
        for b in range(3)
        for c in (True, False)
        for d in (True, False)
    }
    got = enumerate_outcomes(fn)
    assert len(got) == 24 and max_abs_error(got, want) <= 1e-15


def test_harness_refuses_a_key_forked_twice_from_one_stream():
    coins = EnumerationCoins([])
    coins.fork(("draft", 0)).fork(("draft", 0))  # a child may reuse its parent's key
    with pytest.raises(ValueError, match="twice"):
        coins.fork(("draft", 0))


def test_harness_refuses_a_nondeterministic_call_order():
    runs = iter(range(100))

    def racy(coins):
        main, background = coins, coins.fork("bg")
        # what an unsynchronised worker does: which stream draws first changes between runs
        first, second = (main, background) if next(runs) % 2 == 0 else (background, main)
        return first.bernoulli(0.5), second.bernoulli(0.5)

    with pytest.raises(AssertionError, match="not deterministic"):
        enumerate_outcomes(racy)


def test_forks_of_frozen_coins_are_frozen():
    inner = EnumerationCoins([])
    coins = _FreezableCoins(inner)
    early = coins.fork("early")
    probs = torch.tensor([0.3, 0.7], dtype=torch.float64)  # [2]
    early.categorical(probs)
    assert len(inner.choices) == 1  # unfrozen forks reach the enumeration
    coins.frozen = True
    late = coins.fork("late")
    assert [early.categorical(probs), late.categorical(probs), late.fork(0).bernoulli(0.8)] == [
        1,
        1,
        True,
    ]
    assert len(inner.choices) == 1  # frozen forks (made before or after freezing) do not


def test_categorical_point_mass_draws_nothing_and_zero_mass_is_an_error():
    from specdec.sampling import TorchCoins

    coins, ref = TorchCoins(7), TorchCoins(7)
    point = torch.zeros(50)
    point[31] = 1.0
    assert coins.categorical(point) == 31  # greedy: no random number consumed
    spread = torch.softmax(torch.randn(50, generator=torch.Generator().manual_seed(0)), -1)
    assert coins.categorical(spread) == ref.categorical(spread)  # streams still aligned
    assert coins.categorical(torch.tensor([1.0])) == 0
    assert coins.categorical(torch.tensor([0.0, 0.0, 3.0, 0.0])) == 2  # unnormalised point mass
    # mass the float64 CDF cannot resolve (1e-30 beside 1) could never be drawn: a point mass
    assert coins.categorical(torch.tensor([0.0, 1.0, 1e-30], dtype=torch.float64)) == 1
    near = torch.tensor([0.999, 0.001])  # not a point mass: one coin is drawn
    assert coins.categorical(near) == ref.categorical(near)
    assert coins.categorical(spread) == ref.categorical(spread)  # still aligned after all that
    with pytest.raises(ValueError, match="no positive probability"):
        coins.categorical(torch.zeros(5))
