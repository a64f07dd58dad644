"""Tree-structure helpers (specdec/trees.py) on a hand-checked tree, as lists and tensors."""

from __future__ import annotations

import pytest
import torch

from specdec import trees

# 0 -> {1 -> {3, 4 -> 6}, 2 -> {5, 7}}; node 8 hangs off the prefix on its own
PARENT = [-1, 0, 0, 1, 1, 2, 4, 2, -1]


@pytest.mark.parametrize("as_tensor", [False, True])
def test_helpers_on_a_known_tree(as_tensor):
    parent = torch.tensor(PARENT) if as_tensor else PARENT
    assert trees.depths(parent) == [0, 1, 1, 2, 2, 2, 3, 2, 0]
    assert trees.children(parent) == [[1, 2], [3, 4], [5, 7], [], [6], [], [], [], []]
    assert trees.path_to(parent, 6) == [0, 1, 4, 6]
    assert trees.path_to(parent, 8) == [8]
    assert not trees.is_chain(parent)
    mask = trees.ancestor_mask(parent)  # [N, N]
    for i in range(len(PARENT)):
        want = set(trees.path_to(PARENT, i))
        assert {j for j in range(len(PARENT)) if mask[i, j]} == want


def test_chains():
    assert trees.is_chain([]) and trees.is_chain([-1]) and trees.is_chain(torch.arange(-1, 4))
    assert not trees.is_chain([-1, -1]) and not trees.is_chain([-1, 0, 0])
    assert trees.ancestor_mask([-1, 0, 1]).equal(torch.tril(torch.ones(3, 3, dtype=torch.bool)))


def test_a_parent_after_its_child_is_refused():
    with pytest.raises(AssertionError, match="bad parent"):
        trees.depths([-1, 2, 0])
