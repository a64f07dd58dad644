"""Engine behaviour: greedy equivalence, accounting identities, stop handling and bad input."""

from __future__ import annotations

import pytest
import torch

from specdec.core import Draft
from specdec.drafters import EmptyDrafter, ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.metrics import summarize
from specdec.models.tiny import tiny_pair
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import Tokenwise

PROMPTS = ["Hello there, how are you?", "def add(a, b):", "Q: 2+3=?\nA:"]


def run(pair, drafter_lm, gamma, *, temperature, seed=0, prompt=PROMPTS[0], max_new=24, stops=()):
    sampling = Sampling(temperature=temperature)
    target = CachedLM(pair.target)
    if gamma == 0:
        drafter = EmptyDrafter()
    else:
        drafter = ModelDrafter(CachedLM(drafter_lm, role="draft"), Fixed(gamma))
    ids = pair.tokenizer.encode(prompt)
    return generate(
        ids,
        target,
        drafter,
        Tokenwise(),
        sampling=sampling,
        coins=TorchCoins(seed),
        max_new_tokens=max_new,
        stop_ids=stops,
    )


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_greedy_sps_equals_ar(tiny64, prompt, gamma):
    ar = run(tiny64, None, 0, temperature=0.0, prompt=prompt)
    sps = run(tiny64, tiny64.draft, gamma, temperature=0.0, prompt=prompt, seed=7)
    assert sps.tokens == ar.tokens
    assert len(ar.tokens) == 24


def test_greedy_equivalence_holds_with_a_draft_that_often_agrees():
    """A draft that shares the target's weights except one layer accepts some and rejects some."""
    pair = tiny_pair(placement={"dtype": "float64"})
    draft = tiny_pair(placement={"dtype": "float64"}).target
    with torch.no_grad():
        draft.model.layers[1].mlp.down_proj.weight.mul_(0.5)
    ar = run(pair, None, 0, temperature=0.0, max_new=40)
    sps = run(pair, draft, 4, temperature=0.0, max_new=40)
    assert sps.tokens == ar.tokens
    s = sps.stats
    assert 0 < s.accepted < s.drafted  # both branches of the verifier were exercised


def test_ar_block_efficiency_is_exactly_one(tiny64):
    out = run(tiny64, None, 0, temperature=1.0, max_new=20)
    m = summarize([out.stats])
    assert m["block_efficiency"] == 1.0 and m["new_tokens"] == 20 and m["target_forwards"] == 20
    assert out.stats.drafted == 0 and out.stats.draft_forwards == 0


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
def test_draft_identical_to_target_accepts_everything(tiny64, temperature):
    gamma = 3
    out = run(tiny64, tiny64.target, gamma, temperature=temperature, max_new=8 * (gamma + 1))
    m = summarize([out.stats])
    assert m["acceptance_rate"] == 1.0
    assert m["block_efficiency"] == gamma + 1


def test_new_tokens_equal_sum_of_emitted(tiny64):
    out = run(tiny64, tiny64.draft, 3, temperature=1.0, max_new=37)
    s = out.stats
    assert s.new_tokens == len(out.tokens) == 37
    assert s.target_forwards == len(s.accepted_per_step)
    # every step but the last emits accepted + 1 (the last may be cut at the budget)
    assert sum(a + 1 for a in s.accepted_per_step[:-1]) + 1 <= s.new_tokens
    assert s.new_tokens <= sum(a + 1 for a in s.accepted_per_step)


def test_same_seed_same_output_different_seed_differs(tiny64):
    a = run(tiny64, tiny64.draft, 3, temperature=1.0, seed=3)
    b = run(tiny64, tiny64.draft, 3, temperature=1.0, seed=3)
    c = run(tiny64, tiny64.draft, 3, temperature=1.0, seed=4)
    assert a.tokens == b.tokens
    assert a.tokens != c.tokens


def test_stop_id_ends_generation_and_is_counted(tiny64):
    free = run(tiny64, tiny64.draft, 3, temperature=0.0, max_new=30)
    stop = free.tokens[10]
    first = free.tokens.index(stop)
    out = run(tiny64, tiny64.draft, 3, temperature=0.0, max_new=30, stops=[stop])
    assert out.tokens == free.tokens[: first + 1]
    assert out.stats.new_tokens == first + 1


def test_max_new_tokens_zero_returns_nothing(tiny64):
    out = run(tiny64, tiny64.draft, 3, temperature=1.0, max_new=0)
    assert out.tokens == [] and out.stats.target_forwards == 0


def test_bad_inputs_raise_clear_errors(tiny64):
    sampling = Sampling(temperature=1.0)
    target = CachedLM(tiny64.target)
    with pytest.raises(ValueError, match="empty prompt"):
        generate(
            [],
            target,
            EmptyDrafter(),
            Tokenwise(),
            sampling=sampling,
            coins=TorchCoins(0),
            max_new_tokens=4,
        )
    with pytest.raises(ValueError, match="batch size must be 1"):
        generate(
            torch.ones(2, 3, dtype=torch.long),
            target,
            EmptyDrafter(),
            Tokenwise(),
            sampling=sampling,
            coins=TorchCoins(0),
            max_new_tokens=4,
        )
    with pytest.raises(ValueError, match="gamma must be >= 1"):
        Fixed(0)
    with pytest.raises(ValueError, match="temperature"):
        Sampling(temperature=-1.0)


def test_vocabulary_mismatch_names_both_sizes():
    # a draft with fewer rows than the tokenizer has ids (more rows are padding: specdec.vocab)
    with pytest.raises(
        ValueError,
        match=r"the draft has 200 output rows but the tokenizer has "
        r"259 ids \(target: 259 output rows, draft: 200",
    ):
        tiny_pair(draft_vocab_size=200)
    # the engine refuses a mismatched drafter even when the pair was not built by tiny_pair
    pair = tiny_pair()
    big = tiny_pair().target
    big.resize_token_embeddings(300)
    drafter = ModelDrafter(CachedLM(big, role="draft"), Fixed(2))
    with pytest.raises(
        ValueError, match=r"target vocabulary size 259 != draft vocabulary size 300"
    ):
        generate(
            [1, 2],
            CachedLM(pair.target),
            drafter,
            Tokenwise(),
            sampling=Sampling(),
            coins=TorchCoins(0),
            max_new_tokens=4,
        )


# --- hand-made verifier cases with forced logits (vLLM style) ---------------------------------


def forced(rows: list[int], vocab: int = 5) -> torch.Tensor:
    """One-hot target rows: row i puts all its mass on token rows[i]."""
    return torch.nn.functional.one_hot(torch.tensor(rows), vocab).double()


@pytest.mark.parametrize(
    "draft_tokens, target_argmax, want_path, want_token",
    [
        ([1, 2, 3], [1, 2, 3, 4], [1, 2, 3], 4),  # perfect match: bonus from the last row
        ([1, 0, 3], [1, 2, 3, 4], [1], 2),  # early mismatch: recovered = target argmax
        ([], [3], [], 3),  # empty draft: plain AR step
    ],
    ids=["perfect-match", "early-mismatch", "empty-draft"],
)
def test_tokenwise_forced_cases(draft_tokens, target_argmax, want_path, want_token):
    q = torch.full((len(draft_tokens) + 1, 5), 0.2, dtype=torch.float64)
    draft = Draft.chain(0, torch.tensor(draft_tokens, dtype=torch.long), q)
    verdict = Tokenwise().verify(draft, forced(target_argmax), TorchCoins(0))
    assert verdict.path == want_path and verdict.token == want_token
