"""Digests of learned weights: stable, sensitive to any trained change, found inside drafters."""

from __future__ import annotations

import torch

from specdec.bench.run.fingerprint import SAMPLES, learned_weights, weights_digest
from specdec.drafters.model import ModelDrafter
from specdec.drafters.policies import Fixed
from specdec.drafters.specdecpp import SpecDecPP
from specdec.lm import CachedLM
from specdec.models.tiny import tiny_pair
from specdec.nets.specdecpp.head import AcceptanceHead, save_head
from specdec.verifiers.tokenwise import Tokenwise


def test_digest_is_stable_and_equal_for_a_copy():
    pair = tiny_pair()
    copy = tiny_pair()
    assert weights_digest(pair.draft) == weights_digest(pair.draft) == weights_digest(copy.draft)
    assert weights_digest(pair.draft) != weights_digest(pair.target)


def test_one_changed_value_outside_the_sample_changes_the_digest():
    pair = tiny_pair()
    before = weights_digest(pair.draft)
    weight = pair.draft.get_output_embeddings().weight  # [V, H]
    assert weight.numel() // SAMPLES > 1  # the sample takes every k-th value, k > 1: not index 1
    with torch.no_grad():
        weight.view(-1)[1] += 1e-3
    assert weights_digest(pair.draft) != before


def test_learned_weights_names_the_draft_and_the_policy_head_but_not_the_target(tmp_path):
    pair = tiny_pair()
    hidden = pair.draft.config.hidden_size
    head_dir = save_head(AcceptanceHead(hidden, 1), tmp_path / "head", experiment="test")
    drafter = ModelDrafter(CachedLM(pair.draft, role="draft"), SpecDecPP(str(head_dir)))
    found = learned_weights(pair.target, pair.draft, drafter, Tokenwise())
    assert set(found) == {"draft", "ModelDrafter.policy.head"}
    assert found["draft"] == weights_digest(pair.draft)

    plain = ModelDrafter(CachedLM(pair.draft, role="draft"), Fixed(2))
    assert learned_weights(pair.target, pair.draft, plain) == {"draft": found["draft"]}
