"""KV-cache invariants of CachedLM on the tiny fp64 pair."""

from __future__ import annotations

import torch

from specdec.lm import CachedLM

ATOL = 1e-10


def full_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0]  # [T, V]


def test_incremental_forwards_equal_one_full_forward(tiny64):
    ids = list(range(10, 40))
    lm = CachedLM(tiny64.target)
    chunks = [ids[:7], ids[7:8], ids[8:13], ids[13:14], ids[14:]]
    got = torch.cat([lm.forward(torch.tensor(c)).logits for c in chunks])  # [T, V]
    torch.testing.assert_close(got, full_logits(tiny64.target, ids), atol=ATOL, rtol=0)
    assert lm.ids == ids


def test_cache_after_accept_reject_sequence_equals_fresh_prefill(tiny64):
    """Arbitrary keep() patterns leave the cache equal to a fresh prefill of the committed ids."""
    gen = torch.Generator().manual_seed(0)
    lm = CachedLM(tiny64.target)
    committed = [5, 6, 7]
    lm.forward(torch.tensor(committed[:-1]))
    lm.keep([0, 1])
    for _ in range(12):
        # 1. append root + a random chain, 2. keep a random prefix of it (root always kept)
        n = int(torch.randint(1, 6, (1,), generator=gen))
        chain = [committed[-1], *torch.randint(0, 259, (n,), generator=gen).tolist()]
        lm.forward(torch.tensor(chain))
        m = int(torch.randint(0, n + 1, (1,), generator=gen))
        lm.keep(list(range(m + 1)))
        committed = (
            committed[:-1] + chain[: m + 1] + [int(torch.randint(0, 259, (1,), generator=gen))]
        )
        assert lm.ids == committed[:-1]
        # 3. the next token's logits equal those of a full forward over the committed ids
        probe = lm.forward(torch.tensor(committed[-1:])).logits[-1]
        lm.keep([])
        torch.testing.assert_close(
            probe, full_logits(tiny64.target, committed)[-1], atol=ATOL, rtol=0
        )


def test_crop_then_extend_matches_full_forward(tiny64):
    lm = CachedLM(tiny64.draft, role="draft")
    lm.forward(torch.tensor([1, 2, 3, 4, 5, 6]))
    lm.crop(3)
    assert lm.ids == [1, 2, 3]
    out = lm.forward(torch.tensor([9, 8])).logits
    torch.testing.assert_close(
        out, full_logits(tiny64.draft, [1, 2, 3, 9, 8])[-2:], atol=ATOL, rtol=0
    )


def test_forward_log_records_every_forward(tiny64):
    lm = CachedLM(tiny64.target)
    lm.forward(torch.tensor([1, 2, 3]))
    lm.forward(torch.tensor([4]))
    assert [(r.new_tokens, r.context) for r in lm.forward_log] == [(3, 0), (1, 3)]
    assert all(r.seconds >= 0 and r.role == "target" for r in lm.forward_log)


def test_embeddings_made_by_a_callable_are_timed_as_part_of_the_forward(tiny64):
    import time

    lm = CachedLM(tiny64.target, role="draft")
    emb = tiny64.target.get_input_embeddings()
    ids = torch.tensor([3, 4, 5])

    def slow_embeds() -> torch.Tensor:  # e.g. a feature drafter's fusion of target features
        time.sleep(0.05)
        return emb(ids)  # [3, H]

    out = lm.forward(ids, inputs_embeds=slow_embeds)
    assert lm.forward_log[-1].seconds >= 0.05 and lm.forward_log[-1].new_tokens == 3
    assert torch.allclose(out.logits, full_logits(tiny64.target, [3, 4, 5]))
