"""EAGLE-3/SpecBlock training data: cached target features and the validation split."""

from __future__ import annotations

import torch

from specdec.data.traces import Trace, write_trace_chunks
from specdec.models.tiny import tiny_pair


def test_the_validation_split_does_not_move_when_traces_are_added():
    from specdec.learners.eagle3.module import held_out

    def trace(seed: int) -> Trace:
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, 1000, (12,), generator=g)
        return Trace(ids, 8, torch.zeros(4, 2, dtype=torch.long), torch.zeros(4, 2))

    old = [trace(s) for s in range(300)]
    held = [held_out(t, 10) for t in old]
    assert 10 <= sum(held) <= 55  # ~30 expected; P(outside) < 1e-6 (binomial 300, 0.1)
    new = [trace(s) for s in range(1000, 1100)] + old  # a new file that sorts first
    assert [held_out(t, 10) for t in new[100:]] == held
    again = Trace(old[0].ids.clone(), 8, old[0].topk_ids, old[0].topk_logp)  # another pass
    assert held_out(again, 10) == held[0]
    assert not any(held_out(t, 0) for t in old)


def test_cached_features_are_the_targets_hidden_states_at_each_trace_token(tmp_path):
    from specdec.data.features import cache_features, load_feature_traces

    pair = tiny_pair()
    texts = ["a short prompt", "a somewhat longer prompt about several things at once"]
    write_trace_chunks(pair, tmp_path, texts, prefix="traces_self", max_new=4, batch_size=8)
    assert cache_features(pair, tmp_path, [0, 2], batch_size=2) == 1
    for trace, feats in load_feature_traces(tmp_path):  # each trace alone, no padding
        states = pair.target(input_ids=trace.ids[None], output_hidden_states=True).hidden_states
        want = torch.stack([states[0][0], states[2][0]], 1).half()  # [n, 2, H]
        torch.testing.assert_close(feats, want, atol=2e-3, rtol=1e-3)
