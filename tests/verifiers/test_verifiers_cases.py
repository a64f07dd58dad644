"""Hand-made verifier cases with forced (0/1) target rows, vLLM style, and greedy CLI overrides.

Every probability is 0 or 1, so the verdicts are deterministic whatever the coins: perfect match,
early mismatch, empty draft (chains, ``q`` given and point masses) and a two-branch tree.
"""

from __future__ import annotations

import pytest
import torch

from specdec.bench.run.runner import build_method
from specdec.core import Draft
from specdec.engine import generate
from specdec.sampling import TorchCoins
from specdec.verifiers import Blockwise, Hierarchical, RecursiveRejection, Tokenwise

V = 8
CHAIN_VERIFIERS = {
    "tokenwise": Tokenwise,
    "rrs": RecursiveRejection,
    "blockwise": Blockwise,
    "hsd": lambda: Hierarchical("capped"),
    "hsd_code": lambda: Hierarchical("joint"),
}
TREE_VERIFIERS = {k: v for k, v in CHAIN_VERIFIERS.items() if k != "tokenwise"}


def forced_p(argmaxes: list[int]) -> torch.Tensor:
    """``[N, V]`` one-hot target rows (what temperature 0 produces)."""
    return torch.nn.functional.one_hot(torch.tensor(argmaxes), V).double()


def chain(tokens: list[int], q: str) -> Draft:
    n = len(tokens)
    rows = None if q == "none" else torch.full((n + 1, V), 1.0 / V, dtype=torch.float64)
    return Draft.chain(0, torch.tensor(tokens), rows)


@pytest.mark.parametrize("q", ["uniform", "none"])
@pytest.mark.parametrize("name", sorted(CHAIN_VERIFIERS))
def test_perfect_match_accepts_all_and_adds_the_bonus(name, q):
    verdict = CHAIN_VERIFIERS[name]().verify(
        chain([1, 2, 3], q), forced_p([1, 2, 3, 4]), TorchCoins(0)
    )
    assert verdict.path == [1, 2, 3] and verdict.token == 4


@pytest.mark.parametrize("q", ["uniform", "none"])
@pytest.mark.parametrize("name", sorted(CHAIN_VERIFIERS))
def test_early_mismatch_recovers_the_target_token(name, q):
    verdict = CHAIN_VERIFIERS[name]().verify(
        chain([1, 2, 3], q), forced_p([1, 5, 3, 4]), TorchCoins(0)
    )
    assert verdict.path == [1] and verdict.token == 5


@pytest.mark.parametrize("name", sorted(CHAIN_VERIFIERS))
def test_empty_draft_samples_from_the_target(name):
    verdict = CHAIN_VERIFIERS[name]().verify(Draft.empty(0), forced_p([7]), TorchCoins(0))
    assert verdict.path == [] and verdict.token == 7


@pytest.mark.parametrize("q", ["uniform", "none"])
@pytest.mark.parametrize("name", sorted(TREE_VERIFIERS))
def test_tree_takes_the_matching_sibling(name, q):
    # root -> {1: wrong, 2: right}; 2 -> {3: wrong, 4: right}; 1 -> {6}
    tokens = torch.tensor([0, 1, 2, 6, 3, 4])
    parent = torch.tensor([-1, 0, 0, 1, 2, 2])
    rows = None if q == "none" else torch.full((6, V), 1.0 / V, dtype=torch.float64)
    p = forced_p([2, 6, 4, 0, 0, 5])  # node 5 (token 4) is the accepted leaf: bonus 5
    verdict = TREE_VERIFIERS[name]().verify(Draft(tokens, parent, rows), p, TorchCoins(0))
    assert verdict.path == [2, 5] and verdict.token == 5


def test_tree_with_no_matching_child_recovers():
    tokens, parent = torch.tensor([0, 1, 2]), torch.tensor([-1, 0, 0])
    for verifier in TREE_VERIFIERS.values():
        verdict = verifier().verify(Draft(tokens, parent, None), forced_p([3, 0, 0]), TorchCoins(0))
        assert verdict.path == [] and verdict.token == 3


# --- greedy equivalence of CLI overrides on the tiny fp64 pair ----------------------------------
GREEDY = ["sampling.temperature=0", "model.placement.dtype=float64"]


@pytest.fixture(scope="module")
def pair():
    from specdec.models.tiny import tiny_pair

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_pair(placement={"dtype": "float64"})
    torch.set_num_threads(before)


def greedy(compose, pair, overrides: list[str]) -> list[int]:
    cfg = compose("eval", [*overrides, *GREEDY])
    m = build_method(cfg, pair)
    target, drafter, verifier, sampling = m.target, m.drafter, m.verifier, m.sampling
    prompt = pair.tokenizer.encode("The quick brown fox")
    return generate(
        prompt, target, drafter, verifier, sampling=sampling, coins=TorchCoins(1), max_new_tokens=16
    ).tokens


@pytest.mark.parametrize(
    "overrides",
    [
        ["method=sps", "verifier=blockwise"],
        ["method=sps", "verifier=hsd"],
        ["method=rrs", "drafter.num_drafts=2"],
        ["method=hsd_tree", "drafter.branching=[2,2]"],
    ],
    ids=lambda o: ",".join(o),
)
def test_cli_override_is_greedy_equivalent_to_ar(compose, pair, overrides):
    cfg = compose("eval", [*overrides, *GREEDY])
    assert cfg.verifier._target_.startswith("specdec.verifiers.")
    assert greedy(compose, pair, overrides) == greedy(compose, pair, ["method=ar"])
