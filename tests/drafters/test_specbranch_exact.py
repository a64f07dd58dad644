"""SpecBranch (``specdec.drafters.specbranch``) is exact at T > 0 through the real engine.

Exact enumeration (``testing.enumeration``) over every draw -- the main lane's, the verifier's and
the worker's forked coins -- on tiny table LMs, with the worker inline (the harness needs a fixed
draw order). Each case checks that its paths took every part of the method: PRE and POST steps,
hits and misses, proposed trees with a fork of k >= 2 branches, a data-dependent k (two
different k), and with a (stub) H-RAD head every class.
"""

from __future__ import annotations

import pytest
import torch

from specdec.drafters.policies import Fixed
from specdec.drafters.specbranch import SpecBranchDrafter
from specdec.engine import generate
from specdec.sampling import Sampling
from specdec.testing.enumeration import enumerate_outcomes, total_variation
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.trees import children
from specdec.verifiers import RecursiveRejection

PROMPT, TARGET_SEED = [0, 1], 7


class StubHrad:
    """An H-RAD head whose class is a fixed function of the features (so every class occurs)."""

    def __init__(self, vocab: int) -> None:
        self.meta = {
            "layers": 1,
            "experiment": "stub",
            "target_hidden_size": vocab,
            "target_num_layers": 1,
            "target_vocab_size": vocab,
        }

    def predict(self, z: torch.Tensor) -> torch.Tensor:
        cls = int(abs(float(z.sum())) * 7) % 3
        return torch.nn.functional.one_hot(torch.tensor(cls), 3).double()


def watch(drafter: SpecBranchDrafter, seen: set[str]) -> SpecBranchDrafter:
    """Record the parts of the method a run takes."""
    propose, observe = drafter.propose, drafter.observe

    def watched_propose(ctx):
        seen.add("post" if drafter._next is not None else "pre")
        before = drafter.counters()
        draft = propose(ctx)
        after = drafter.counters()
        seen.update(k for k in ("hrad_0", "hrad_1", "hrad_2") if after.get(k, 0) > before.get(k, 0))
        widths = {len(k) for k in children(draft.parent.tolist()) if len(k) > 1}
        seen.update(f"fork{k}" for k in widths)
        return draft

    def watched_observe(ctx, draft, verdict):
        before = drafter.counters()
        observe(ctx, draft, verdict)
        after = drafter.counters()
        seen.update(k for k in ("hits", "misses") if after.get(k, 0) > before.get(k, 0))

    drafter.propose, drafter.observe = watched_propose, watched_observe
    return drafter


def enumerate_specbranch(
    drafter: SpecBranchDrafter, target: TableLM, sampling: Sampling, length: int
):
    def run(coins):
        out = generate(
            PROMPT,
            target,
            drafter,
            RecursiveRejection(),
            sampling=sampling,
            coins=coins,
            max_new_tokens=length,
        )
        return tuple(out.tokens)

    got = enumerate_outcomes(run)
    assert abs(sum(got.values()) - 1.0) < 1e-12
    return got


FULL = {"pre", "post", "hits", "misses", "fork2"}  # every part of the schedule


@pytest.mark.parametrize("hrad", [False, True], ids=["soft-stop", "hrad-stub"])
@pytest.mark.parametrize(
    "branching,temperature,vocab,length,k_max,need",
    [
        ("sample", 1.0, 2, 4, 4, FULL | {"fork3"}),
        # three tokens and k_max = 8: branches are tried against residuals that are not point
        # masses, so the siblings' law matters (drawing them from the T = 1 softmax instead of q
        # gives TV 0.03 here; with two tokens or k_max = 4 such a bug passes); 3 tokens out keep
        # it fast
        ("sample", 0.6, 3, 3, 8, {"pre", "fork2", "fork3"}),
        ("topk", 0.8, 3, 4, 4, FULL),
    ],
)
def test_specbranch_is_exact_at_positive_temperature(
    branching, temperature, vocab, length, k_max, need, hrad
):
    # Two drafts: the target's own table (q = p: worker rounds kept often) and another table.
    sampling = Sampling(temperature=temperature)
    target = TableLM(vocab, TARGET_SEED)
    want = ar_joint(target, PROMPT, length, sampling)
    seen: set[str] = set()
    for draft_seed in (TARGET_SEED, TARGET_SEED + 1):
        drafter = SpecBranchDrafter(
            TableLM(vocab, draft_seed, role="draft"),
            Fixed(2),
            threshold=0.95,
            k_max=k_max,
            branching=branching,
            mode="inline",
        )
        if hrad:
            drafter.head, drafter.target_layers = StubHrad(vocab), (-1,)
        got = enumerate_specbranch(watch(drafter, seen), target, sampling, length)
        assert total_variation(got, want) <= 1e-12, f"draft seed {draft_seed}"
    assert seen >= need, seen  # fork2 and fork3: k depends on q(x_b)
    if hrad:
        assert seen >= {"hrad_0", "hrad_1", "hrad_2"}, seen


def test_a_k_from_a_later_sibling_would_not_be_exact():
    # The control that makes the test above able to fail: the sibling walk on a fork whose k is
    # chosen *after* seeing the second sibling (k = 2 only when the second draw is token 2) is
    # biased, while the same fork with k fixed by the first token (k = 2 when it is token 0) is
    # exact.
    from specdec.core import Draft

    p = torch.tensor([0.4, 0.35, 0.25], dtype=torch.float64)
    q = torch.tensor([0.2, 0.2, 0.6], dtype=torch.float64)
    verifier = RecursiveRejection()

    def step(coins, later: bool):
        first = coins.categorical(q)
        second = coins.categorical(q)
        keep = second == 2 if later else first == 0
        tokens = [9, first] + ([second] if keep else [])
        rows = torch.stack([q] + [torch.zeros(3, dtype=torch.float64)] * (len(tokens) - 1))
        draft = Draft(torch.tensor(tokens), torch.tensor([-1] + [0] * (len(tokens) - 1)), rows)
        ptab = torch.stack([p] + [torch.full((3,), 1 / 3, dtype=torch.float64)] * (len(tokens) - 1))
        verdict = verifier.verify(draft, ptab, coins)
        return (tokens[verdict.path[0]],) if verdict.path else (verdict.token,)

    want = {(i,): float(p[i]) for i in range(3)}
    exact = enumerate_outcomes(lambda c: step(c, later=False))
    biased = enumerate_outcomes(lambda c: step(c, later=True))
    assert total_variation(exact, want) <= 1e-12
    assert total_variation(biased, want) > 1e-3


@pytest.mark.parametrize("branching", ["sample", "topk"])
def test_specbranch_is_exact_with_a_stop_id(branching):
    # token 1 ends the generation: nothing is drafted after it, its leaves get no worker round
    sampling, length, stops = Sampling(temperature=1.0), 4, {1}
    target = TableLM(3, TARGET_SEED)
    want: dict = {}
    for seq, prob in ar_joint(target, PROMPT, length, sampling).items():
        cut = next((i for i, t in enumerate(seq) if t in stops), None)
        key = seq if cut is None else seq[: cut + 1]  # what the engine emits
        want[key] = want.get(key, 0.0) + prob
    drafter = SpecBranchDrafter(
        TableLM(3, TARGET_SEED, role="draft"),
        Fixed(2),
        threshold=0.95,
        k_max=4,
        branching=branching,
        mode="inline",
    )

    def run(coins):
        return tuple(
            generate(
                PROMPT,
                target,
                drafter,
                RecursiveRejection(),
                sampling=sampling,
                coins=coins,
                max_new_tokens=length,
                stop_ids=tuple(stops),
            ).tokens
        )

    got = enumerate_outcomes(run)
    assert any(len(seq) < length for seq in got)  # some paths stopped early
    assert total_variation(got, want) <= 1e-12
