"""The lookup drafter's bounds: ``max_ngram`` and ``branches`` refused above their caps with the
key and the fix, and the history of earlier generations kept under its cap (oldest out)."""

from __future__ import annotations

import pytest
import torch

import specdec.drafters.lookup as lookup
from specdec.core import Context
from specdec.drafters import PromptLookupDrafter
from specdec.drafters.ngram_index import MAX_BRANCHES, MAX_NGRAM
from specdec.drafters.policies import Fixed
from specdec.errors import BadInput
from specdec.sampling import Sampling


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"max_ngram": 100000}, "drafter.max_ngram=100000 is over the cap of 64"),
        ({"max_ngram": MAX_NGRAM + 1}, "lower drafter.max_ngram to <= 64"),
        ({"branches": MAX_BRANCHES + 1}, "drafter.branches=65 is over the cap of 64"),
        ({"max_ngram": 2.5}, "drafter.max_ngram must be an integer"),
        ({"branches": True}, "drafter.branches must be an integer"),
    ],
)
def test_knobs_above_their_caps_are_refused(kw, words):
    with pytest.raises(BadInput, match=words):
        PromptLookupDrafter(Fixed(1), **kw)


def test_the_caps_themselves_are_accepted():
    drafter = PromptLookupDrafter(Fixed(1), max_ngram=MAX_NGRAM, branches=MAX_BRANCHES)
    draft = drafter.propose(
        Context(tokens=torch.tensor([1, 2, 3, 1, 4, 1]), coins=None, sampling=Sampling())
    )
    assert draft.tokens.tolist() == [1, 4, 2] and draft.parent.tolist() == [-1, 0, 0]


def test_the_eval_config_refuses_a_huge_max_ngram_before_drafting():
    import specdec

    with pytest.raises(BadInput, match="drafter.max_ngram=100000"):
        specdec.load("tiny", method="pld", drafter__max_ngram=100000)


def generation(drafter: PromptLookupDrafter, prompt: list[int], output: list[int]) -> None:
    drafter.reset()
    drafter.prefill(torch.tensor(prompt))
    drafter.propose(Context(tokens=torch.tensor(prompt + output), coins=None, sampling=Sampling()))


def test_the_history_keeps_at_most_its_cap_newest_generations_first(monkeypatch):
    monkeypatch.setattr(lookup, "MAX_HISTORY_TOKENS", 12)
    drafter = PromptLookupDrafter(Fixed(2), min_ngram=2, history=True)
    for g in range(6):  # six generations of 4 tokens (+ a separator each) through a cap of 12
        generation(drafter, [100], [10 * g + 1, 10 * g + 2, 10 * g + 3, 10 * g + 4])
    drafter.reset()
    assert len(drafter.past) <= 12
    assert drafter.past.ids[-5:] == [51, 52, 53, 54, -1]  # the newest stays
    assert 1 not in drafter.past.ids  # the oldest left
    drafter.prefill(torch.tensor([7, 51, 52]))
    draft = drafter.propose(
        Context(tokens=torch.tensor([7, 51, 52]), coins=None, sampling=Sampling())
    )
    assert draft.tokens.tolist() == [52, 53, 54]  # still drafts from the kept history
