"""The tree drafters (``topk``, ``multi``) grow their trees with ``extend`` on the tiny fp64 pair:
each step forwards the caught-up tokens and each tree node with children once, and drafts the trees
a per-depth full-tree re-forward would (the way they drafted before growth existed; the references
below keep that algorithm); stop ids get no children. Growth itself: ``test_lm_grow.py``.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from specdec.core import Context, Draft, Drafter
from specdec.drafters import MultiDraftDrafter, TopKTreeDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.lm import CachedLM
from specdec.reconcile import common_prefix
from specdec.sampling import Sampling, TorchCoins, warp
from specdec.trees import children
from specdec.verifiers import Hierarchical, RecursiveRejection

ATOL = 1e-10  # float64 work (the tiny pair computes in float64 throughout: models/exact.py)
BRANCHING = [3, 2, 1]
SAMPLING = Sampling(temperature=1.0)


class Recorder(Drafter):
    """Drafts with ``inner`` using fresh coins ``TorchCoins(step)``; records each step."""

    def __init__(self, inner: Drafter) -> None:
        self.inner, self.models, self.makes_trees = inner, inner.models, inner.makes_trees
        self.steps: list[dict] = []

    def reset(self) -> None:
        self.inner.reset()

    def propose(self, ctx: Context) -> Draft:
        lm, seed = self.inner.lm, len(self.steps)
        cached, mark = lm.ids, len(lm.forward_log)
        draft = self.inner.propose(dataclasses.replace(ctx, coins=TorchCoins(seed)))
        sizes = [r.new_tokens for r in lm.forward_log[mark:]]
        depth = min(self.inner.policy.limit(), ctx.budget - 1)
        self.steps.append(
            {
                "ids": ctx.tokens.tolist(),
                "cached": cached,
                "draft": draft,
                "sizes": sizes,
                "seed": seed,
                "depth": depth,
            }
        )
        return draft


def rescorer(model, ids: list[int]):
    """``score(tokens, parent) -> [N, V]``: the whole tree forwarded after ``ids[:-1]``."""
    lm = CachedLM(model, role="draft")
    lm.forward(torch.tensor(ids[:-1]))
    lm.keep(list(range(len(ids) - 1)))

    def score(tokens: list[int], parent: list[int]) -> torch.Tensor:
        logits = lm.forward(torch.tensor(tokens), torch.tensor(parent)).logits  # [N, V]
        lm.keep([])
        return logits

    return score


def topk_reference(score, root: int, depth_limit: int, stops=frozenset()) -> Draft:
    tokens, parent, frontier = [root], [-1], [0]
    for depth in range(depth_limit):
        logits = score(tokens, parent)  # [N, V]
        width = BRANCHING[depth] if depth < len(BRANCHING) else 1
        grown = []
        for node in frontier:
            if tokens[node] in stops and node != 0:
                continue
            for tok in torch.topk(logits[node], width).indices.tolist():
                tokens, parent, grown = tokens + [tok], parent + [node], grown + [len(tokens)]
        frontier = grown
    return Draft(torch.tensor(tokens), torch.tensor(parent), None)


def multi_reference(score, root: int, gamma: int, coins, vocab: int, stops=frozenset()) -> Draft:
    tokens, parent, kids, heads, q = [root], [-1], [{}], [0] * 3, {}  # K = 3 chains
    for _ in range(gamma):
        if all(h is None for h in heads):
            break
        logits = score(tokens, parent)  # [N, V]
        for j, node in enumerate(heads):
            if node is None:
                continue
            q[node] = q.get(node, warp(logits[node][None], SAMPLING)[0])
            tok = coins.categorical(q[node])
            tokens, parent, kids = tokens + [tok], parent + [node], kids + [{}]
            heads[j] = None if tok in stops else kids[node].setdefault(tok, len(tokens) - 1)
    rows = torch.zeros(len(tokens), vocab, dtype=torch.float64)  # [N, V]
    for node, row in q.items():
        rows[node] = row
    return Draft(torch.tensor(tokens), torch.tensor(parent), rows)


def reference_draft(
    name: str, model, ids: list[int], gamma: int, seed: int, stops=frozenset()
) -> Draft:
    score = rescorer(model, ids)
    if name == "topk":
        return topk_reference(score, ids[-1], gamma, stops)
    vocab = model.config.vocab_size
    return multi_reference(score, ids[-1], gamma, TorchCoins(seed), vocab, stops)


def make_drafter(name: str, model, gamma: int) -> Drafter:
    lm = CachedLM(model, role="draft")
    if name == "topk":
        return TopKTreeDrafter(lm, Fixed(gamma), branching=BRANCHING)
    return MultiDraftDrafter(lm, Fixed(gamma), num_drafts=3)


def assert_same_draft(got: Draft, want: Draft) -> None:
    assert got.tokens.tolist() == want.tokens.tolist()
    assert got.parent.tolist() == want.parent.tolist()
    if want.q is not None:
        torch.testing.assert_close(got.q, want.q, atol=ATOL, rtol=0)


@pytest.mark.parametrize("name", ["topk", "multi"])
def test_tree_drafters_forward_each_token_once_and_draft_as_a_full_re_forward(name, tiny64):
    gamma = 3
    drafter = Recorder(make_drafter(name, tiny64.draft, gamma))
    verifier = RecursiveRejection() if name == "topk" else Hierarchical()
    prompt = tiny64.tokenizer.encode("The quick brown fox")
    generate(
        prompt,
        CachedLM(tiny64.target),
        drafter,
        verifier,
        sampling=SAMPLING,
        coins=TorchCoins(0),
        max_new_tokens=16,
    )
    assert len(drafter.steps) >= 4
    for step in drafter.steps:
        ids, draft = step["ids"], step["draft"]
        # 1. The draft LM forwarded the missing committed tokens (root included) once, then each
        #    tree node that has children once: O(N) tokens per step, not O(N * depth).
        caught_up = len(ids) - common_prefix(step["cached"], ids[:-1])
        parents = [n for n, kids in enumerate(children(draft.parent)) if kids and n > 0]
        assert step["sizes"][0] == caught_up
        assert sum(step["sizes"]) == caught_up + len(parents) <= caught_up + draft.num_drafted
        assert len(step["sizes"]) <= 1 + gamma
        # 2. The tree is the one a per-depth re-forward of the whole tree drafts.
        want = reference_draft(name, tiny64.draft, ids, step["depth"], step["seed"])
        assert_same_draft(draft, want)
    # 3. After a step the draft cache holds the committed tokens (the tree was dropped).
    assert drafter.inner.lm.ids == drafter.steps[-1]["ids"]


@pytest.mark.parametrize("name", ["topk", "multi"])
def test_tree_drafters_give_stop_ids_no_children(name, tiny64):
    ids = tiny64.tokenizer.encode("Once upon a time")
    drafter = make_drafter(name, tiny64.draft, 3)
    ctx = Context(tokens=torch.tensor(ids), coins=TorchCoins(5), sampling=SAMPLING)
    stops = frozenset({int(drafter.propose(ctx).tokens[1])})  # a token drafted at depth 1
    ctx = Context(tokens=torch.tensor(ids), coins=TorchCoins(5), sampling=SAMPLING, stop_ids=stops)
    draft = drafter.propose(ctx)
    kids = children(draft.parent)
    assert all(not kids[n] for n in range(1, draft.size) if int(draft.tokens[n]) in stops)
    assert_same_draft(draft, reference_draft(name, tiny64.draft, ids, 3, 5, stops))
