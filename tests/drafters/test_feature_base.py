"""The feature-drafter base (``drafters.features``) and the candidate tree (``candidates``).

* a third feature drafter, defined here in a few lines (its net: one random linear map from the
  target's features to the vocabulary; its expansion rule: top-k children of the best node per
  depth), decodes greedy-identically to ``ar`` on the tiny fp64 pair; loading, placement, the
  target checks, catching up and the ``Draft`` come from the base;
* the base refuses a target its net was not made for (naming the drafter and the fix) and a net
  placed elsewhere than the target;
* ``Candidates``: scores add up along paths, a duplicate child is refused, the frontier is the
  best of a depth without stop tokens, ``best`` keeps ancestors and orders parents first, and
  ``to_draft`` maps candidates to draft nodes.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from specdec.core import TargetView
from specdec.drafters import EmptyDrafter
from specdec.drafters.candidates import Candidates
from specdec.drafters.features import FeatureDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.errors import BadInput
from specdec.lm import CachedLM
from specdec.models.placement import Placement
from specdec.models.tiny import tiny_pair
from specdec.sampling import Sampling, TorchCoins
from specdec.verifiers import RecursiveRejection

LAYERS = (1, 2)


class LinearNet(nn.Module):
    """A random net reading the target's features (``[k, H]`` -> ``[V]`` logits)."""

    def __init__(self, hidden: int, vocab: int, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.proj = nn.Linear(len(LAYERS) * hidden, vocab)
        self.target_layers = list(LAYERS)
        self.meta = {"target_hidden": hidden, "target_vocab": vocab, "target_layers": list(LAYERS)}


class LinearDrafter(FeatureDrafter):
    """The third feature drafter: only its net (``_advance``) and its expansion rule (``_grow``)."""

    name = "Linear"

    def __init__(
        self,
        net: nn.Module,
        policy,
        topk: int = 2,
        total_tokens: int = 5,
        placement: Placement | None = None,
    ) -> None:
        self.topk, self.total = topk, total_tokens
        super().__init__(policy, lambda command: net, experiment="linear", placement=placement)

    def reset(self) -> None:
        super().reset()
        self.seen, self.row = 0, None  # verified positions; log q of the root's children [V]

    def _advance(self, tokens, features):  # features [n, k, H]
        self.seen += int(features.shape[0])
        with torch.inference_mode():
            self.row = self.net.proj(features[-1].flatten()).log_softmax(-1)  # [V]

    def _verified(self) -> int:
        return self.seen

    def _grow(self, tree, ctx, depth_limit):
        best = torch.topk(self.row, self.topk)  # a random rule: the same row at every depth
        tree.add_children(-1, best.values.tolist(), best.indices.tolist())
        for d in range(1, depth_limit):
            for node in tree.frontier(d, 1, ctx.stop_ids):
                tree.add_children(node, best.values.tolist(), best.indices.tolist())


@pytest.fixture(scope="module")
def pair():
    return tiny_pair(placement={"dtype": "float64"})


def _target(pair) -> CachedLM:
    return CachedLM(pair.target, role="target")


@pytest.mark.parametrize("topk,total", [(2, 5), (3, 9), (1, 3)])
def test_a_third_feature_drafter_is_greedy_identical_to_ar(pair, topk, total):
    target, greedy = _target(pair), Sampling(temperature=0.0)
    drafter = LinearDrafter(
        LinearNet(TargetView(target).hidden_size, target.vocab_size),
        Fixed(4),
        topk=topk,
        total_tokens=total,
        placement=pair.placement,
    )
    drafted = []
    propose = drafter.propose
    drafter.propose = lambda ctx: drafted.append(propose(ctx)) or drafted[-1]
    for seed, text in enumerate(("The quick brown fox", "Once upon a time", "x")):
        prompt = pair.tokenizer.encode(text)
        want = generate(
            prompt,
            target,
            EmptyDrafter(),
            RecursiveRejection(),
            sampling=greedy,
            coins=TorchCoins(seed),
            max_new_tokens=16,
        ).tokens
        got = generate(
            prompt,
            target,
            drafter,
            RecursiveRejection(),
            sampling=greedy,
            coins=TorchCoins(seed),
            max_new_tokens=16,
        ).tokens
        assert got == want, text
    assert max(d.num_drafted for d in drafted) == total  # it drafted full trees


def test_the_base_checks_the_target_and_the_placement(pair):
    target = _target(pair)
    view = TargetView(target)
    wrong = LinearDrafter(
        LinearNet(view.hidden_size + 1, view.vocab_size), Fixed(2), placement=pair.placement
    )
    with pytest.raises(BadInput, match=r"Linear drafter .*hidden size .*linear"):
        wrong.attach(view)
    elsewhere = LinearDrafter(
        LinearNet(view.hidden_size, view.vocab_size),
        Fixed(2),
        placement=Placement.cpu(torch.float32),
    )
    with pytest.raises(BadInput, match="placement"):
        elsewhere.attach(view)


def test_candidates_score_dedup_frontier_best_and_draft():
    tree = Candidates()
    a, b = tree.add_children(-1, [-0.1, -1.0], [7, 8])
    c, d = tree.add_children(a, [-0.2, -3.0], [9, 7])
    assert tree.add_children(-1, [-0.5], [7]) == [None]  # the root has a child 7 already
    (e,) = tree.add_children(b, [-0.05], [5])
    assert tree.depth == [1, 1, 2, 2, 2] and tree.score[e] == pytest.approx(-1.05)
    assert tree.frontier(1, 1) == [a] and tree.frontier(2, 5, frozenset({9})) == [e, d]
    assert tree.best(3) == [a, b, c]  # scores -0.1, -1.0, -0.3
    assert tree.best(4) == [a, b, c, e]
    draft = tree.to_draft(42, tree.best(4))
    assert draft.tokens.tolist() == [42, 7, 8, 9, 5]
    assert draft.parent.tolist() == [-1, 0, 0, 1, 2]
