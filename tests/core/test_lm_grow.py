"""Growing a pending tree by frontiers (``extend``) and ``reconcile``, for CachedLM and TableLM.

On the tiny fp64 pair a tree grown frontier by frontier must score every node exactly as one tree
forward and as forwarding its root-to-node path alone; ``keep`` after growth must leave the cache
equal to a fresh prefill. ``reconcile`` must bring any cache state to the committed ids, forwarding
only what is missing (and at least the root). TableLM must behave the same.

The tree drafters that grow their trees this way: ``test_tree_drafters_grow.py``.
"""

from __future__ import annotations

import pytest
import torch

from specdec.lm import CachedLM
from specdec.testing.table_lm import TableLM
from specdec.trees import path_to

ATOL = 1e-10  # float64 work (the tiny pair computes in float64 throughout: models/exact.py)
PREFIX = [11, 12, 13, 14]
# 20 -> {21 -> {23, 24 -> 26}, 22 -> {25, 21}}, and 27 hanging off the prefix beside 20
TOKENS = [20, 21, 22, 23, 24, 25, 26, 21, 27]
PARENT = [-1, 0, 0, 1, 1, 2, 4, 2, -1]
# frontiers in an order that is not node order, so pending index != node index
FRONTIERS = [[8, 0], [2, 1], [7, 4, 3, 5], [6]]


def test_the_float64_pair_computes_in_float64_throughout(tiny64):
    """transformers' RMSNorm and RoPE compute in float32 whatever the model's dtype; the norm's
    float32 reduction depends on the shape, so a tree forward and a full re-forward differed by
    8.9e-10 in q (> ATOL) on a loaded machine. The tiny pair keeps float64 in both."""
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(3, 7, 32, generator=gen, dtype=torch.float64)  # [B, S, H]
    for norm in (tiny64.target.model.norm, tiny64.draft.model.layers[0].input_layernorm):
        rms = (hidden.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon).sqrt()  # [B, S, 1]
        torch.testing.assert_close(norm(hidden), norm.weight * hidden / rms, atol=1e-14, rtol=0)
    rotary = tiny64.target.model.rotary_emb
    positions = torch.arange(0, 4000, 37)[None]  # [1, S]
    angles = positions[..., None].double() * rotary.inv_freq.double()  # [1, S, D/2]
    cos, sin = rotary(hidden, positions)  # [1, S, D]
    assert cos.dtype == torch.float64
    torch.testing.assert_close(cos, torch.cat((angles, angles), -1).cos(), atol=1e-14, rtol=0)
    torch.testing.assert_close(sin, torch.cat((angles, angles), -1).sin(), atol=1e-14, rtol=0)


def reference(lm, ids: list[int]) -> torch.Tensor:
    """``[V]`` next-token logits after ``ids``, computed from scratch."""
    if isinstance(lm, TableLM):
        return lm.logits(tuple(ids))
    with torch.inference_mode():
        return lm.model(input_ids=torch.tensor([ids])).logits[0, -1]


def make_lm(kind: str, tiny64):
    return CachedLM(tiny64.target) if kind == "cached" else TableLM(50, seed=3)


def grow(lm, frontiers: list[list[int]], tokens=TOKENS, parent=PARENT):
    """Forward the tree by ``frontiers`` (first with ``forward``); node -> (slot, logits [V])."""
    slot, out = {}, {}
    for i, nodes in enumerate(frontiers):
        base = len(slot)
        slot.update({n: base + j for j, n in enumerate(nodes)})
        new = torch.tensor([tokens[n] for n in nodes])
        par = torch.tensor([-1 if parent[n] < 0 else slot[parent[n]] for n in nodes])
        logits = (lm.forward(new, par) if i == 0 else lm.extend(new, par)).logits  # [M, V]
        out.update(zip(nodes, logits))
    return slot, out


@pytest.mark.parametrize("kind", ["cached", "table"])
def test_a_grown_tree_equals_one_tree_forward_and_each_path(kind, tiny64):
    lm = make_lm(kind, tiny64)
    lm.forward(torch.tensor(PREFIX))
    _, grown = grow(lm, FRONTIERS)
    whole = make_lm(kind, tiny64)
    whole.forward(torch.tensor(PREFIX))
    once = whole.forward(torch.tensor(TOKENS), torch.tensor(PARENT)).logits  # [N, V]
    for node, logits in grown.items():
        torch.testing.assert_close(logits, once[node], atol=ATOL, rtol=0)
        path = PREFIX + [TOKENS[i] for i in path_to(PARENT, node)]
        torch.testing.assert_close(logits, reference(lm, path), atol=ATOL, rtol=0)
    # the log holds one record per frontier: its new tokens and the context before it
    log = lm.forward_log[-len(FRONTIERS) :]
    assert [r.new_tokens for r in log] == [len(f) for f in FRONTIERS]
    assert [r.context for r in log] == [4, 6, 8, 12]


@pytest.mark.parametrize("kind", ["cached", "table"])
def test_extend_grows_a_pending_chain_and_new_nodes_may_hang_off_new_nodes(kind, tiny64):
    """The drafting case: the prefix is still a pending chain; one frontier holds parent + child."""
    lm = make_lm(kind, tiny64)
    lm.forward(torch.tensor(PREFIX))  # pending chain, indices 0..3
    out = lm.extend(torch.tensor([30, 31, 32]), torch.tensor([3, 4, 1])).logits  # [3, V]
    assert lm.ids == []  # pending chain + tree: nothing committed yet
    for row, ids in zip(out, [PREFIX + [30], PREFIX + [30, 31], PREFIX[:2] + [32]]):
        torch.testing.assert_close(row, reference(lm, ids), atol=ATOL, rtol=0)
    lm.keep([0, 1, 2, 3, 4, 5])
    assert lm.ids == PREFIX + [30, 31]
    got = lm.forward(torch.tensor([33])).logits[0]
    torch.testing.assert_close(got, reference(lm, PREFIX + [30, 31, 33]), atol=ATOL, rtol=0)


@pytest.mark.parametrize("kind", ["cached", "table"])
@pytest.mark.parametrize("leaf", [6, 3, 5, 7, 8, 0, None])
def test_keep_after_growth_equals_a_fresh_prefill(kind, leaf, tiny64):
    lm = make_lm(kind, tiny64)
    lm.forward(torch.tensor(PREFIX))
    lm.keep(list(range(len(PREFIX))))
    slot, _ = grow(lm, FRONTIERS)
    nodes = [] if leaf is None else path_to(PARENT, leaf)
    lm.keep([slot[n] for n in nodes])
    committed = PREFIX + [TOKENS[n] for n in nodes]
    assert lm.ids == committed
    # a chain, then a tree grown on it, see exactly the committed prefix
    chain = lm.forward(torch.tensor([40, 41])).logits  # [2, V]
    torch.testing.assert_close(chain[1], reference(lm, committed + [40, 41]), atol=ATOL, rtol=0)
    tree = lm.extend(torch.tensor([42, 43]), torch.tensor([0, 2])).logits  # [2, V]
    torch.testing.assert_close(tree[1], reference(lm, committed + [40, 42, 43]), atol=ATOL, rtol=0)


@pytest.mark.parametrize("kind", ["cached", "table"])
def test_reconcile(kind, tiny64):
    ids = PREFIX + [15, 16, 17]
    lm = make_lm(kind, tiny64)
    want = torch.stack([reference(lm, ids[: i + 1]) for i in range(len(ids))])  # [T, V]

    def check(out, forwarded: int) -> None:
        assert lm.forward_log[-1].new_tokens == forwarded
        assert lm.ids == ids  # the forwarded tokens stay a pending chain
        torch.testing.assert_close(out.logits, want[-forwarded:], atol=ATOL, rtol=0)

    # 1. Nothing cached: every id is forwarded.
    check(lm.reconcile(ids), len(ids))
    # 2. Everything cached, root included: only the root is forwarded again.
    check(lm.reconcile(ids), 1)
    # 3. A cache that diverges after 5 tokens and runs longer: crop to 5, forward the rest.
    lm.crop(5)
    lm.forward(torch.tensor([90, 91, 92, 93]))
    check(lm.reconcile(ids), 2)
    # 4. A pending tree (after a committed prefix) is dropped first.
    lm.forward(torch.tensor([50, 51, 52]), torch.tensor([-1, -1, 0]))
    check(lm.reconcile(ids), 1)
    # 5. A pending tree grown on a pending chain: the chain is dropped with it.
    lm.crop(3)
    lm.forward(torch.tensor(ids[3:6]))
    assert lm.ids == ids[:6]
    lm.extend(torch.tensor([60, 61]), torch.tensor([2, -1]))
    check(lm.reconcile(ids), len(ids) - 3)
