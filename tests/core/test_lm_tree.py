"""Tree forwards of CachedLM on the tiny fp64 pair.

A tree forward (4-D ancestor mask, depth positions) must give every node the logits of forwarding
its root-to-node path on its own, and ``keep`` on a tree path must leave the cache equal to a fresh
prefill of the committed tokens.
"""

from __future__ import annotations

import torch

from specdec.lm import CachedLM
from specdec.trees import path_to

ATOL = 1e-10
PREFIX = [11, 12, 13, 14]
# root 20 -> {21 -> {23, 24 -> 26}, 22 -> 25}; a duplicate token (21) under 22 as in multi-draft
TOKENS = [20, 21, 22, 23, 24, 25, 26, 21]
PARENT = [-1, 0, 0, 1, 1, 2, 4, 2]


def full_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0]  # [T, V]


def test_tree_forward_equals_forwarding_each_path(tiny64):
    lm = CachedLM(tiny64.target)
    lm.forward(torch.tensor(PREFIX))
    logits = lm.forward(torch.tensor(TOKENS), torch.tensor(PARENT)).logits  # [N, V]
    for node in range(len(TOKENS)):
        ids = PREFIX + [TOKENS[i] for i in path_to(PARENT, node)]
        want = full_logits(tiny64.target, ids)[-1]
        torch.testing.assert_close(logits[node], want, atol=ATOL, rtol=0)


def test_keep_on_a_tree_equals_re_prefilling_the_accepted_path(tiny64):
    for leaf in [6, 3, 5, 7, 0]:
        lm = CachedLM(tiny64.target)
        lm.forward(torch.tensor(PREFIX))
        lm.forward(torch.tensor(TOKENS), torch.tensor(PARENT))
        kept = path_to(PARENT, leaf)
        lm.keep(kept)
        committed = PREFIX + [TOKENS[i] for i in kept]
        assert lm.ids == committed
        # the next forward (a chain and then a small tree) sees exactly the committed prefix
        probe = lm.forward(torch.tensor([30, 31])).logits
        torch.testing.assert_close(
            probe, full_logits(tiny64.target, committed + [30, 31])[-2:], atol=ATOL, rtol=0
        )
        lm.keep([0])
        tree = lm.forward(torch.tensor([32, 33, 34]), torch.tensor([-1, 0, 0])).logits
        torch.testing.assert_close(
            tree[2], full_logits(tiny64.target, committed + [30, 32, 34])[-1], atol=ATOL, rtol=0
        )


def test_dropping_a_tree_leaves_the_prefix(tiny64):
    """Drafters score trees and drop them (keep([])): the cache must be the prefix again."""
    lm = CachedLM(tiny64.draft, role="draft")
    lm.forward(torch.tensor(PREFIX))
    lm.forward(torch.tensor(TOKENS), torch.tensor(PARENT))
    lm.keep([])
    assert lm.ids == PREFIX
    got = lm.forward(torch.tensor([40])).logits[-1]
    torch.testing.assert_close(got, full_logits(tiny64.draft, PREFIX + [40])[-1], atol=ATOL, rtol=0)
