"""SpecBlock network (``learners/specblock``): masks, rank features, shapes, cache, save/load.

* block-1 and block->=2 visibility against a per-slot reference built with plain loops;
* rank features and rank buckets against a direct computation;
* the shift and fusion shapes; the shift really mixes slot k-1 into slot k (and not k+1);
* a trace in one forward equals its positions appended one by one to a cache (fp64);
* save/load round trip; a drafter made for another target, or a missing asset, fails naming the fix.
"""

from __future__ import annotations

import math

import pytest
import torch

from specdec.models.tiny import tiny_lm
from specdec.nets.specblock.net import new_specblock
from specdec.nets.specblock.slots import AppendKeys, ChainKeys, rank_buckets, rank_features
from specdec.nets.specblock.store import load_specblock, save_specblock

LAYERS = (0, 1, 2)
K = 4


def _visible_block1(keys: AppendKeys, s: int, k: int, i: int, slot: int) -> set:
    """Keys ``(block, position, slot)`` the query ``(i, slot)`` sees, read from the masks."""
    got = {
        (1, c // k, c % k)
        for c in range(keys.cross_mask.shape[1])
        if keys.cross_mask[i, c] and c // k != i
    }  # own-position keys are reached through the local group
    got |= {(1, i, j) for j in range(k) if keys.local_mask[0, slot, j]}
    return got


def test_block1_mask_matches_a_per_slot_reference():
    s = 5
    keys = AppendKeys(None, s, K)
    # the cross group never shows a query its own position (the local group does, causally)
    own = torch.tensor([[c // K == i for c in range(s * K)] for i in range(s)])
    assert not (keys.cross_mask & own).any()
    for i in range(s):
        for slot in range(K):
            want = {(1, j, t) for j in range(s) for t in range(K) if j < i}
            want |= {(1, i, t) for t in range(K) if t <= slot}
            assert _visible_block1(keys, s, K, i, slot) == want, (i, slot)


def test_appended_positions_see_the_cache_and_not_the_future():
    keys = AppendKeys(None, 2, K, first=3)  # positions 3, 4 after cached 0, 1, 2
    for row, i in enumerate((3, 4)):
        seen = {c // K for c in range(keys.cross_mask.shape[1]) if keys.cross_mask[row, c]}
        assert seen == set(range(i))


@pytest.mark.parametrize("cuts", [[2], [1, 3], [4, 1]])
def test_valid_prefix_mask_matches_a_per_slot_reference(cuts):
    s, prev = 4, len(cuts)
    cross_mask = torch.tensor([[c // K < i for c in range(s * K)] for i in range(s)])
    prefix = [(torch.zeros(1, 1, s, prev * K, 2), torch.zeros(1, 1, s, prev * K, 2))]
    keys = ChainKeys(
        [(torch.zeros(1, 1, s * K, 2),) * 2], cross_mask, prefix, torch.tensor([cuts]), K
    )
    b = prev + 2  # the block being computed (blocks 1..prev+1 came before)
    for i in range(s):
        for slot in range(K):
            # plain loops: block 1 at j < i; earlier blocks at i below their cut; own slots <= k
            want = {(1, j, t) for j in range(s) for t in range(K) if j < i}
            for m, cut in enumerate(cuts):
                want |= {(m + 1, i, t) for t in range(K) if t < cut}
            want |= {(b, i, t) for t in range(K) if t <= slot}
            got = {(1, c // K, c % K) for c in range(s * K) if keys.cross_mask[i, c]}
            row = keys.local_mask[0, slot]  # [prev*K + K]
            got |= {(m + 1, i, t) for m in range(prev) for t in range(K) if row[m * K + t]}
            got |= {(b, i, t) for t in range(K) if row[prev * K + t]}
            assert got == want, (cuts, i, slot)


def test_rank_features_match_a_direct_computation():
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 50, generator=gen, dtype=torch.float64) * 3
    got = rank_features(logits)
    assert got.shape == (3, 15)
    for r in range(3):
        top = sorted(logits[r].tolist(), reverse=True)[:20]
        lse = math.log(sum(math.exp(x) for x in top))
        logp = [x - lse for x in top]
        want = logp[:10] + [
            top[0] - top[1],
            top[0] - top[2],
            top[0] - top[4],
            math.exp(logp[0]),
            -sum(math.exp(x) * x for x in logp),
        ]
        torch.testing.assert_close(got[r], torch.tensor(want, dtype=torch.float64))


def test_rank_buckets_follow_the_rank_edges():
    logits = torch.arange(30, 0, -1, dtype=torch.float64)  # token t has rank t + 1
    target = torch.tensor([0, 1, 3, 4, 9, 10, 29, -1])
    assert rank_buckets(logits.expand(8, -1), target).tolist() == [0, 1, 1, 2, 2, 3, 3, 3]


@pytest.fixture
def net(tiny64):
    vocab = tiny64.target.config.vocab_size
    return (
        new_specblock(
            tiny64.target, torch.arange(vocab), LAYERS, slots=K, layers=2, rank_hidden=8, seed=3
        )
        .double()
        .eval()
    )


def _inputs(tiny64, net, ids):
    target = tiny64.target
    with torch.no_grad():
        states = target(input_ids=ids, output_hidden_states=True).hidden_states
        feats = torch.stack([states[i] for i in LAYERS], 2)  # [B, T, k, H]
        s = ids.shape[1] - 1
        embeds = target.get_input_embeddings()(ids[:, 1:])  # [B, S, H]
        return net.condition(feats[:, :s]), embeds, torch.arange(1, s + 1)[None]


def test_shapes_of_fusion_shift_and_heads(tiny64, net):
    ids = torch.tensor([[5, 17, 3, 44, 9]])
    cond, embeds, pos = _inputs(tiny64, net, ids)
    h = net.config.hidden_size
    assert net.fuse.weight.shape == (h, 3 * h) and len(net.shifts) == 1
    assert net.shifts[0].weight.shape == (h, 2 * h)
    with torch.no_grad():
        out = net.block(cond, embeds, pos, AppendKeys(None, 4, K))
    assert out.hidden.shape == (1, 4, K, h) and out.logits.shape == (1, 4, K, 259)
    assert out.rank_logits.shape == (1, 4, K, 4)
    assert out.kv[0][0].shape == (1, net.layers[0].self_attn.kv_heads, 4, K, 16)


def test_the_shift_mixes_the_previous_slot_only(tiny64, net):
    ids = torch.tensor([[5, 17, 3]])
    cond, embeds, pos = _inputs(tiny64, net, ids)
    with torch.no_grad():
        net.shifts[0].weight[:, 32:].normal_(0, 0.3)  # give slot k-1 a say
        for layer in net.layers:  # no attention between slots: the shift is the only path
            layer.self_attn.v_proj.weight.zero_()
        before = net.block(cond, embeds, pos, AppendKeys(None, 2, K)).logits
        net.queries[1].add_(1.0)  # change slot 1's input only
        after = net.block(cond, embeds, pos, AppendKeys(None, 2, K)).logits
    changed = [(after[0, :, s] - before[0, :, s]).abs().max() > 1e-6 for s in range(K)]
    assert changed == [False, True, True, False]  # slot 1 itself, slot 2 through one shift


def test_one_forward_equals_positions_appended_one_by_one(tiny64, net):
    ids = torch.tensor([[5, 17, 3, 44, 9, 12, 30, 7, 21]])
    cond, embeds, pos = _inputs(tiny64, net, ids)
    s = cond.shape[1]
    with torch.no_grad():
        full = net.block(cond, embeds, pos, AppendKeys(None, s, K))
        cache, rows = None, []
        for i in range(s):
            out = net.block(
                cond[:, i : i + 1],
                embeds[:, i : i + 1],
                pos[:, i : i + 1],
                AppendKeys(cache, 1, K, first=i),
            )
            new = [(k.flatten(2, 3), v.flatten(2, 3)) for k, v in out.kv]
            cache = (
                new
                if cache is None
                else [
                    (torch.cat([a, c], 2), torch.cat([b, d], 2))
                    for (a, b), (c, d) in zip(cache, new)
                ]
            )
            rows.append(out)
    for field in ("logits", "rank_logits", "hidden"):
        got = torch.cat([getattr(o, field) for o in rows], 1)
        torch.testing.assert_close(got, getattr(full, field), atol=1e-12, rtol=0)


def test_save_load_round_trip_and_refusals(tiny64, net, tmp_path):
    save_specblock(net, tmp_path / "sb", dtype=torch.float64)
    back = load_specblock(tmp_path / "sb", tiny64.target)
    ids = torch.tensor([[5, 17, 3, 44]])
    with torch.no_grad():
        want = net.block(*_inputs(tiny64, net, ids), AppendKeys(None, 3, K)).logits
        got = back.block(*_inputs(tiny64, back, ids), AppendKeys(None, 3, K)).logits
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert back.meta["slots"] == K and back.target_layers == LAYERS
    other = tiny_lm(259, hidden=16, layers=2, heads=2, seed=0, dtype=torch.float64)
    with pytest.raises(
        ValueError,
        match="SpecBlock drafter .* hidden size 32, but this target "
        "has 16; retrain it with `python -m specdec.train",
    ):
        load_specblock(tmp_path / "sb", other)
    with pytest.raises(FileNotFoundError, match=r"\+experiment=specblock_<model>"):
        load_specblock(tmp_path / "missing")
    with pytest.raises(ValueError, match="out of range"):
        new_specblock(tiny64.target, torch.arange(259), (0, 5), slots=K)


def test_an_int8_head_loads_back_within_its_rounding_step(tiny64, net, tmp_path):
    save_specblock(net, tmp_path / "fp", dtype=torch.float64)
    save_specblock(net, tmp_path / "q", dtype=torch.float64, int8=["head.weight"])
    size = {d: (tmp_path / d / "model.safetensors").stat().st_size for d in ("fp", "q")}
    w = net.head.weight.detach()  # [V_d, H]
    # 8 bytes -> 1 per weight, plus a scale per row and its header entry
    assert size["fp"] - size["q"] >= w.numel() * 7 - 8 * w.shape[0] - 256
    back = load_specblock(tmp_path / "q", tiny64.target)
    step = w.abs().amax(1, keepdim=True) / 127  # [V_d, 1]: one rounding step per row
    err = (back.head.weight - w).abs()
    assert (err <= step / 2 + 1e-12).all() and err.max() > 0
    for name, p in net.state_dict().items():  # nothing else changed
        if name != "head.weight":
            assert torch.equal(back.state_dict()[name], p), name
    with pytest.raises(ValueError, match="'norm.weight' is not one"):
        save_specblock(net, tmp_path / "bad", int8=["norm.weight"])
