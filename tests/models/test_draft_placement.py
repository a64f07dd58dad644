"""Draft placement: ``model.placement.draft_device`` / ``model.placement.draft_threads`` reach the
pair loader, the draft's ``CachedLM`` (its own torch thread budget around each forward) and the
pair's fingerprint; ``pair.devices()`` lists what timing synchronises."""

from __future__ import annotations

import pytest
import torch

from specdec.bench.run.runner import build_method
from specdec.lm import CachedLM
from specdec.models.pair import place_draft
from specdec.models.tiny import tiny_lm, tiny_pair


def _threads_seen(lm: CachedLM) -> list[int]:
    seen: list[int] = []
    lm.model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    return seen


def test_draft_threads_apply_around_the_drafts_forwards_only(compose):
    cfg = compose("eval", ["method=sps", "model.placement.draft_threads=2"])
    from hydra.utils import instantiate

    pair = instantiate(cfg.model)
    assert pair.draft_threads == 2 and pair.describe()["draft_threads"] == "2"
    method = build_method(cfg, pair)
    draft = method.drafter.models[0]
    assert draft.threads == 2 and method.target.threads is None
    before = torch.get_num_threads()  # 1 under the test suite (conftest)
    seen_draft, seen_target = _threads_seen(draft), _threads_seen(method.target)
    draft.forward(torch.tensor([1, 2, 3]))
    method.target.forward(torch.tensor([1, 2, 3]))
    assert seen_draft == [2] and seen_target == [before]
    assert torch.get_num_threads() == before


def test_pair_devices_and_fingerprint_of_an_explicit_draft_device():
    pair = tiny_pair(placement={"draft_device": "cpu"})
    assert pair.devices() == [torch.device("cpu")]
    assert pair.describe()["draft_device"] == "cpu"
    # unset: the placement records the target's device (keys naming the draft are left out of
    # the comparison with a draft-less baseline, specdec.bench.report.runs)
    assert tiny_pair().describe()["draft_device"] == "cpu"


def test_bad_placement_is_refused_with_the_fix():
    with pytest.raises(ValueError, match="model.placement.draft_threads must be an integer >= 1"):
        tiny_pair(placement={"draft_threads": 0})
    target = tiny_lm(64, hidden=16, layers=1, heads=2, seed=0, dtype=torch.float32)
    draft = tiny_lm(64, hidden=16, layers=1, heads=2, seed=1, dtype=torch.float32)
    draft.model.embed_tokens = target.model.embed_tokens  # a draft sharing the target's embedding
    with pytest.raises(ValueError, match="model.placement.draft_device=meta alone; leave it null"):
        place_draft(target, draft, "meta")
    assert target.model.embed_tokens.weight.device.type == "cpu"  # nothing was moved
