"""SpecBlock's decoding-time block 1 (``nets/specblock/append.py``) against ``SpecBlockNet.block``.

* one causal attention over the flattened slots equals the cross + local masks of ``AppendKeys``
  (grouped-query heads, three layers, fp64): outputs of the kept positions and every slot's keys;
* appends after a cache (the caller's store) equal the same positions in one trace;
* ``BlockLM`` (preallocated, geometrically grown buffers) on the shipped tiny asset gives the old
  path's block 1 and block 2 (cache as concatenated ``AppendKeys`` keys), and an append writes
  into its buffers without reallocating them.
"""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig

from specdec.drafters.block_lm import BlockLM
from specdec.nets.specblock.append import append_block
from specdec.nets.specblock.net import SpecBlockNet
from specdec.nets.specblock.slots import AppendKeys, ChainKeys
from specdec.nets.specblock.store import load_specblock
from specdec.testing.paths import REPO

K = 4
TINY_ASSET = REPO / "specdec" / "assets" / "specblock" / "tiny"


@pytest.fixture(scope="module")
def gqa_net() -> SpecBlockNet:
    """A random 3-layer network with 4 query heads sharing 2 key heads, in float64."""
    torch.manual_seed(0)
    cfg = LlamaConfig(
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=60,
        max_position_embeddings=256,
    )
    cfg.draft_vocab_size = 40
    net = SpecBlockNet(cfg, (0, 1), slots=K, rank_hidden=8).double().eval()
    with torch.no_grad():
        net.queries.normal_(0, 1.0)
    return net


def _trace(net: SpecBlockNet, s: int, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    h = net.config.hidden_size
    dtype = net.head.weight.dtype
    cond = torch.randn(1, s, h, generator=gen).to(dtype)
    embeds = torch.randn(1, s, h, generator=gen).to(dtype)
    return cond, embeds, torch.arange(1, s + 1)[None]


class CatStore:
    """The cache as concatenated keys (the old path's), for ``append_block``."""

    def __init__(self) -> None:
        self.cache: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def __call__(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if layer in self.cache:
            k = torch.cat([self.cache[layer][0], k], 2)
            v = torch.cat([self.cache[layer][1], v], 2)
        self.cache[layer] = (k, v)
        return k, v


@pytest.mark.parametrize("keep", [6, 2, 1])
def test_append_block_equals_block_over_a_whole_trace(gqa_net, keep):
    cond, embeds, pos = _trace(gqa_net, 6)
    with torch.no_grad():
        want = gqa_net.block(cond, embeds, pos, AppendKeys(None, 6, K))
        got = append_block(gqa_net, cond, embeds, pos, CatStore(), 0, keep)
    for field in ("logits", "rank_logits", "hidden"):
        torch.testing.assert_close(
            getattr(got, field), getattr(want, field)[:, -keep:], atol=1e-12, rtol=0
        )
    for (gk, gv), (wk, wv) in zip(got.kv, want.kv, strict=True):
        torch.testing.assert_close(gk, wk, atol=1e-12, rtol=0)
        torch.testing.assert_close(gv, wv, atol=1e-12, rtol=0)


def test_appends_after_a_cache_equal_the_trace(gqa_net):
    cond, embeds, pos = _trace(gqa_net, 7)
    store, rows = CatStore(), []
    with torch.no_grad():
        want = gqa_net.block(cond, embeds, pos, AppendKeys(None, 7, K))
        for a, b in ((0, 4), (4, 6), (6, 7)):
            out = append_block(
                gqa_net, cond[:, a:b], embeds[:, a:b], pos[:, a:b], store, a * K, keep=b - a
            )
            rows.append(out.logits)
    torch.testing.assert_close(torch.cat(rows, 1), want.logits, atol=1e-12, rtol=0)


def test_appends_take_attention_outputs_in_any_memory_layout(gqa_net, monkeypatch):
    """CUDA's attention kernels return ``[B, h, Q, d]`` as a strided view of ``[B, Q, h, d]``
    (the CPU's math kernel returns it contiguous): an append must not ``view`` it (an H200 run
    raised "view size is not compatible" here on the real pair, fp32)."""
    import specdec.nets.specblock.append as append

    sdpa = append.F.scaled_dot_product_attention

    def strided(*args, **kwargs):  # same values, the layout a CUDA kernel returns
        return sdpa(*args, **kwargs).transpose(1, 2).contiguous().transpose(1, 2)

    cond, embeds, pos = _trace(gqa_net, 7)
    with torch.no_grad():
        want = gqa_net.block(cond, embeds, pos, AppendKeys(None, 7, K))
        store = CatStore()
        append_block(gqa_net, cond[:, :4], embeds[:, :4], pos[:, :4], store, 0, keep=4)
        monkeypatch.setattr(append.F, "scaled_dot_product_attention", strided)
        got = append_block(gqa_net, cond[:, 4:], embeds[:, 4:], pos[:, 4:], store, 4 * K, keep=3)
    torch.testing.assert_close(got.logits, want.logits[:, 4:], atol=1e-12, rtol=0)


def test_block_lm_matches_the_old_path_on_the_shipped_tiny_asset():
    net = load_specblock(TINY_ASSET)
    lm = BlockLM(net, net.meta["target_vocab"])
    s = 70  # past the buffers' first capacity (64 positions): one geometric growth
    cond, embeds, pos = _trace(net, s + 3, seed=2)
    with torch.no_grad():
        want = net.block(cond, embeds, pos, AppendKeys(None, s + 3, K))
        outs = [
            lm.append(cond[0, :s], embeds[0, :s]),
            lm.append(cond[0, s : s + 1], embeds[0, s : s + 1]),
        ]
        ptr = lm.cache[0][0].data_ptr()
        outs.append(lm.append(cond[0, s + 1 :], embeds[0, s + 1 :]))
        assert lm.cache[0][0].data_ptr() == ptr  # written in place, not a copy of the cache
        # block 2 below the last position: the old path's keys are the trace's, concatenated
        cut, leaf = torch.tensor([1, 3]), torch.randn(2, net.config.hidden_size)
        got2 = lm.chain(outs[-1].hidden[0, -1, cut - 1], leaf, s + 2, cut)
        flat = [(k.flatten(2, 3), v.flatten(2, 3)) for k, v in want.kv]
        at = slice((s + 2) * K, (s + 3) * K)
        keys = ChainKeys(
            [(k[:, :, : (s + 2) * K], v[:, :, : (s + 2) * K]) for k, v in flat],
            torch.ones(1, (s + 2) * K, dtype=torch.bool),
            [
                (
                    k[:, :, at][:, :, None].expand(-1, -1, 2, -1, -1),
                    v[:, :, at][:, :, None].expand(-1, -1, 2, -1, -1),
                )
                for k, v in flat
            ],
            cut[:, None],
            K,
        )
        want2 = net.block(want.hidden[:, -1, cut - 1], leaf[None], (s + 3 + cut)[None], keys)
    for i, out in zip((s - 1, s, s + 2), outs, strict=True):
        torch.testing.assert_close(out.logits[0, -1], want.logits[0, i], atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(
            out.rank_logits[0, -1], want.rank_logits[0, i], atol=2e-5, rtol=1e-5
        )
    torch.testing.assert_close(got2.logits, want2.logits, atol=2e-5, rtol=1e-5)
    assert lm.positions == s + 3 and lm.cache[0][0].shape[2] == (s + 3) * K
