"""Vocabulary rows: a draft whose output rows differ from the target's by padding
rows runs every method losslessly and never drafts a row it lacks; tokenizers that truly differ are
refused naming both sizes (``specdec.vocab``)."""

from __future__ import annotations

import itertools

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from specdec.bench.run.runner import build_method
from specdec.drafters import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.models.tiny import byte_tokenizer, tiny_lm, tiny_pair
from specdec.sampling import Sampling, TorchCoins, warp
from specdec.testing.enumeration import enumerate_outcomes, max_abs_error
from specdec.verifiers import Tokenwise
from specdec.vocab import check_rows, fit_rows

TOKENS = 259  # the tiny byte tokenizer's ids
# methods whose drafts come from the pair's draft model (chain, parallel, multi-draft, trees)
DRAFT_METHODS = ["sps", "adaedl", "pearl", "hsd", "rrs", "rrs_tree", "hsd_tree"]


def test_fit_rows_pads_with_minus_inf_and_cuts_extra_rows():
    logits = torch.tensor([[1.0, 2.0, 3.0]])  # [1, 3]
    padded = fit_rows(logits, 5)
    assert padded.shape == (1, 5) and torch.equal(padded[:, :3], logits)
    assert torch.isneginf(padded[:, 3:]).all()
    assert torch.softmax(padded, -1)[0, 3:].sum() == 0  # q = 0 on the padding rows
    assert torch.equal(fit_rows(logits, 2), logits[:, :2])
    assert fit_rows(logits, 3) is logits


@pytest.fixture(scope="module", params=[(320, TOKENS), (TOKENS, 320)], ids=["short", "long"])
def padded(request):
    """float64 tiny pairs: a draft with fewer rows than the target, and one with more."""
    target_rows, draft_rows = request.param
    return tiny_pair(
        vocab_size=target_rows, draft_vocab_size=draft_rows, placement={"dtype": "float64"}
    )


def _greedy(compose, pair, method: str, prompt: list[int]) -> tuple[list[int], int]:
    """(tokens, number of draft forwards) of a greedy generation."""
    cfg = compose(
        "eval", [f"method={method}", "sampling.temperature=0", "model.placement.dtype=float64"]
    )
    m = build_method(cfg, pair)
    out = generate(
        prompt,
        m.target,
        m.drafter,
        m.verifier,
        sampling=m.sampling,
        coins=TorchCoins(1),
        max_new_tokens=24,
    )
    return out.tokens, out.stats.draft_forwards


@pytest.mark.parametrize("method", DRAFT_METHODS)
def test_padded_pair_is_greedy_identical_to_ar(compose, padded, method):
    prompt = padded.tokenizer.encode("The quick brown fox")
    want, _ = _greedy(compose, padded, "ar", prompt)
    if padded.target.config.vocab_size == 320:  # the draft is fed id 0 for those (fit_ids)
        assert max(want) >= TOKENS, "the target emits none of its padding rows on this prompt"
    got, draft_forwards = _greedy(compose, padded, method, prompt)
    assert got == want
    assert draft_forwards > 0, f"{method} never ran the draft: the identity would say nothing"


def test_the_draft_never_drafts_a_row_it_lacks_when_sampling(compose):
    pair = tiny_pair(vocab_size=320)  # target 320 rows, draft 259
    cfg = compose("eval", ["method=sps", "sampling.temperature=1.5"])
    m = build_method(cfg, pair)
    assert m.drafter.models[0].vocab_size == 320
    drafted: list[int] = []
    propose = m.drafter.propose
    m.drafter.propose = lambda ctx: (d := propose(ctx), drafted.extend(d.tokens[1:].tolist()))[0]
    emitted: list[int] = []
    for seed in range(4):
        emitted += generate(
            [5, 6, 7],
            m.target,
            m.drafter,
            m.verifier,
            sampling=m.sampling,
            coins=TorchCoins(seed),
            max_new_tokens=30,
        ).tokens
    assert len(drafted) > 40 and max(drafted) < TOKENS
    assert max(emitted) < 320  # ids past the draft's rows may be emitted: the target's own law


def _target_joint(model, prompt: list[int], length: int, sampling: Sampling) -> dict:
    """Exact law of ``length`` tokens sampled autoregressively from ``model`` (full forwards)."""
    rows = model.get_output_embeddings().weight.shape[0]
    out = {}
    for seq in itertools.product(range(rows), repeat=length):
        prob, ctx = 1.0, list(prompt)
        for tok in seq:
            with torch.no_grad():
                logits = model(torch.tensor([ctx])).logits[0, -1:]  # [1, V]
            prob *= float(warp(logits, sampling)[0, tok])
            ctx.append(tok)
        out[seq] = prob
    return out


@pytest.mark.parametrize("draft_rows", [4, 8], ids=["short", "long"])
def test_sps_on_padded_rows_is_exactly_the_targets_law(draft_rows):
    """Exact enumeration at T = 1: every draft / verify branch, through the real CachedLM."""
    target = tiny_lm(6, hidden=16, layers=1, heads=2, seed=0, dtype=torch.float64)
    draft = tiny_lm(draft_rows, hidden=16, layers=1, heads=2, seed=3, dtype=torch.float64)
    sampling, prompt, length = Sampling(temperature=1.0), [1, 2], 2
    tlm = CachedLM(target)
    dlm = CachedLM(draft, role="draft", vocab_size=6)
    drafted: set[int] = set()

    def run(coins):
        drafter = ModelDrafter(dlm, Fixed(2))
        propose = drafter.propose
        drafter.propose = lambda ctx: (d := propose(ctx), drafted.update(d.tokens[1:].tolist()))[0]
        out = generate(
            prompt, tlm, drafter, Tokenwise(), sampling=sampling, coins=coins, max_new_tokens=length
        )
        return tuple(out.tokens)

    got = enumerate_outcomes(run)
    want = _target_joint(target, prompt, length, sampling)
    assert abs(sum(got.values()) - 1) < 1e-12
    assert max_abs_error(got, want) < 1e-12
    if draft_rows < 6:
        assert drafted and max(drafted) < draft_rows  # rows 4, 5 were never drafted


def _permuted_tokenizer() -> PreTrainedTokenizerFast:
    """The byte tokenizer's tokens with two ids swapped: same size, different vocabulary."""
    vocab = byte_tokenizer().get_vocab()
    a, b = sorted(vocab)[:2]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    return PreTrainedTokenizerFast(tokenizer_object=tok)


def test_different_tokenizers_are_refused_naming_both_sizes():
    tok = byte_tokenizer()
    check_rows(320, 259, tok, byte_tokenizer())  # same tokenizer: padding rows only
    bigger = byte_tokenizer()
    bigger.add_special_tokens({"additional_special_tokens": ["<|extra|>"]})
    with pytest.raises(
        ValueError,
        match=r"target's tokenizer \(259 tokens\) and the draft's "
        r"\(260 tokens\) differ \('<\|extra\|>': target id None",
    ):
        check_rows(320, 320, tok, bigger)
    # same size, same rows, different ids: a sizes-only check would let it through
    with pytest.raises(
        ValueError,
        match=r"\(259 tokens\) and the draft's \(259 tokens\) differ.*"
        r"target: 259 output rows, draft: 259 output rows.*"
        r"pick a draft of the same model family",
    ):
        check_rows(259, 259, tok, _permuted_tokenizer())
    with pytest.raises(
        ValueError,
        match=r"the target has 258 output rows but the tokenizer has "
        r"259 ids",
    ):
        check_rows(258, 300, tok)
