"""Warm-starting SpecBlock from EAGLE-3 (``learners/specblock/warm.py``).

At the first position block 1's slot 0 sees only itself, as EAGLE-3's first position does, so a
warm-started SpecBlock's slot-0 logits there equal EAGLE-3's exactly (fp64) once the
position-query term is zero (``query_scale=0``); layers after the first start as the identity;
the head, norm and token map are EAGLE-3's; a drafter reading other target layers is refused
naming both.
"""

from __future__ import annotations

import pytest
import torch

from specdec.learners.specblock.unroll import unroll
from specdec.learners.specblock.warm import warm_from_eagle3
from specdec.nets.eagle3.net import new_eagle3
from specdec.nets.specblock.net import new_specblock

LAYERS = (0, 1, 2)
K = 4


def _trained_eagle3(tiny64, token_map: torch.Tensor):
    """An EAGLE-3 net whose layer, norm and head no longer equal the target's (as if trained)."""
    net = new_eagle3(tiny64.target, token_map, LAYERS, seed=7).double()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in net.parameters():
            if p.requires_grad:
                p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.05)
    return net.eval()


def test_slot0_at_the_first_position_is_eagle3s_first_draft(tiny64):
    target = tiny64.target
    vocab = target.config.vocab_size
    eagle = _trained_eagle3(tiny64, torch.arange(0, vocab, 2))  # half the vocabulary
    net = new_specblock(
        target, torch.arange(vocab), LAYERS, slots=K, layers=2, rank_hidden=8, seed=5
    ).double()
    warm_from_eagle3(net, eagle, query_scale=0.0)
    assert torch.equal(net.token_map, eagle.decoder.token_map)
    vd = eagle.decoder.token_map.numel()
    assert net.head.weight.shape[0] == vd == net.meta["draft_vocab_size"]
    ids = torch.tensor([[5, 17, 3, 44, 9, 12]])  # [1, T]
    embed = target.get_input_embeddings()
    with torch.no_grad():
        states = target(input_ids=ids, output_hidden_states=True).hidden_states
        feats = torch.stack([states[i] for i in LAYERS], 2)  # [1, T, k, H]
        ((_, block1),) = unroll(net.eval(), embed, ids, feats, [])
        z = eagle.inputs(embed(ids[:, 1:2]), eagle.condition(feats[:, :1]))  # [1, 1, H]
        want = eagle.decoder.forward_reduced(None, inputs_embeds=z)[0, 0]  # [V_d]
    torch.testing.assert_close(block1.logits[0, 0, 0], want, atol=1e-10, rtol=0)
    # the default scale keeps a small query term that tells the slots apart
    net = new_specblock(
        target, torch.arange(vocab), LAYERS, slots=K, layers=2, rank_hidden=8, seed=5
    ).double()
    warm_from_eagle3(net, eagle)
    with torch.no_grad():
        ((_, scaled),) = unroll(net.eval(), embed, ids, feats, [])
    assert (scaled.logits[0, 0, 1] - scaled.logits[0, 0, 0]).abs().max() > 1e-6


def test_layers_after_the_first_start_as_the_identity(tiny64):
    target = tiny64.target
    net = new_specblock(
        target,
        torch.arange(target.config.vocab_size),
        LAYERS,
        slots=K,
        layers=2,
        rank_hidden=8,
        seed=5,
    ).double()
    warm_from_eagle3(net, _trained_eagle3(tiny64, torch.arange(20)))
    ids = torch.tensor([[5, 17, 3, 44, 9, 12, 30]])
    embed = target.get_input_embeddings()
    with torch.no_grad():
        states = target(input_ids=ids, output_hidden_states=True).hidden_states
        feats = torch.stack([states[i] for i in LAYERS], 2)  # [1, T, k, H]
        two = [out.hidden for _, out in unroll(net.eval(), embed, ids, feats, [2])]
        net.layers = torch.nn.ModuleList(net.layers[:1])  # the same net without layer 1
        one = [out.hidden for _, out in unroll(net, embed, ids, feats, [2])]
    for a, b in zip(two, one):  # blocks 1 and 2
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


def test_an_eagle3_drafter_of_other_layers_is_refused_naming_both(tiny64):
    vocab = tiny64.target.config.vocab_size
    eagle = new_eagle3(tiny64.target, torch.arange(vocab), (0, 2, 1), seed=7)
    net = new_specblock(
        tiny64.target, torch.arange(vocab), LAYERS, slots=K, layers=2, rank_hidden=8, seed=5
    )
    with pytest.raises(ValueError, match=r"\[0, 2, 1\].*\[0, 1, 2\]"):
        warm_from_eagle3(net, eagle)
