"""Prompt lookup (``specdec.drafters.lookup``): match semantics, and exact at T > 0 through the real
engine (chain and tree). The tiny pair and the eval CLI's ``method=pld`` presets:
``test_lookup_pair.py``.

Match semantics are checked against a brute-force reference on random sequences as well as on
hand-made cases. The exact tests enumerate every draw (``testing.enumeration``) on table LMs with a
repeating prompt, and check that the enumerated paths saw lookup hits, misses, rejections and (for
trees) several root children, so a broken drafter or verifier path cannot pass unseen.
"""

from __future__ import annotations

import random

import pytest
import torch

from specdec.core import Context, Draft
from specdec.drafters import PromptLookupDrafter
from specdec.drafters.policies import Fixed
from specdec.engine import generate
from specdec.errors import BadInput
from specdec.sampling import Sampling
from specdec.testing.enumeration import enumerate_outcomes, total_variation, truncate_at_stop
from specdec.testing.table_lm import TableLM, ar_joint
from specdec.trees import children
from specdec.verifiers import RecursiveRejection, Tokenwise


def _ctx(tokens) -> Context:
    """A context of ``tokens`` for the lookup drafter (no coins, no sampling read)."""
    return Context(tokens=torch.tensor(tokens), coins=None, sampling=Sampling())


def draft_of(tokens, *, gamma=4, budget=1 << 30, stop_ids=(), **kw) -> Draft:
    drafter = PromptLookupDrafter(Fixed(gamma), **kw)
    ctx = Context(
        tokens=torch.tensor(tokens),
        coins=None,
        sampling=Sampling(),
        budget=budget,
        stop_ids=frozenset(stop_ids),
    )
    return drafter.propose(ctx)


def chains(draft: Draft) -> list[list[int]]:
    """The root-to-leaf token chains of a draft (root excluded), in node order of their leaves."""
    toks, par = draft.tokens.tolist(), draft.parent.tolist()
    kids = children(par)
    out = []
    for leaf in (i for i in range(1, len(toks)) if not kids[i]):
        path, node = [], leaf
        while node > 0:
            path.append(toks[node])
            node = par[node]
        out.append(path[::-1])
    return out


def test_the_longest_ngram_wins_over_a_more_recent_shorter_one():
    tokens = [5, 6, 7, 1, 6, 8, 9, 5, 6]  # [5, 6] -> 7 (n = 2); [6] -> 8 more recently (n = 1)
    assert chains(draft_of(tokens, max_ngram=2)) == [[7, 1, 6, 8]]
    assert chains(draft_of(tokens, max_ngram=1)) == [[8, 9, 5, 6]]


def test_the_most_recent_match_wins_among_equally_long_ones():
    assert chains(draft_of([3, 1, 3, 2, 3], gamma=2)) == [[2, 3]]


def test_budget_stop_ids_and_misses():
    tokens = [4, 5, 6, 7, 8, 4]
    assert chains(draft_of(tokens, gamma=3)) == [[5, 6, 7]]
    assert chains(draft_of(tokens, gamma=3, budget=3)) == [[5, 6]]  # at most budget - 1
    assert draft_of(tokens, budget=1).num_drafted == 0
    assert chains(draft_of(tokens, gamma=3, stop_ids={6})) == [[5, 6]]  # cut after a stop id
    assert chains(draft_of(tokens, gamma=9)) == [[5, 6, 7, 8, 4]]  # the context ends
    miss = draft_of([1, 2, 3, 4])
    assert miss.num_drafted == 0 and miss.tokens.tolist() == [4] and miss.q is None
    assert draft_of(tokens, min_ngram=2).num_drafted == 0  # only a 1-gram matches


def test_a_tree_branches_over_matches_with_distinct_next_tokens():
    tokens = [9, 1, 3, 5, 1, 2, 7, 9, 1]
    # [9, 1] -> 3 (n = 2); then n = 1: [1] -> 2 (most recent), 3 (a repeat: skipped)
    draft = draft_of(tokens, gamma=2, max_ngram=2, branches=3)
    assert chains(draft) == [[3, 5], [2, 7]]
    roots = children(draft.parent.tolist())[0]
    assert len(roots) == 2 and draft.q is None
    assert PromptLookupDrafter(Fixed(2), branches=3).makes_trees
    assert not PromptLookupDrafter(Fixed(2)).makes_trees


def reference(tokens: list[int], gamma: int, lo: int, hi: int, k: int) -> list[list[int]]:
    """Brute force: every (n, position) match, longest n first, most recent first."""
    out, firsts = [], set()
    for n in range(hi, lo - 1, -1):
        if n >= len(tokens):
            continue
        for s in range(len(tokens) - 1, n - 1, -1):
            if tokens[s - n : s] == tokens[-n:] and tokens[s] not in firsts and len(out) < k:
                firsts.add(tokens[s])
                out.append(tokens[s : s + gamma])
    return out


def test_matches_agree_with_a_brute_force_search_as_the_context_grows():
    rng = random.Random(0)
    for case in range(40):
        lo = rng.randint(1, 2)
        hi, k, vocab = rng.randint(lo, 4), rng.randint(1, 3), rng.randint(2, 6)
        seq = [rng.randrange(vocab) for _ in range(30)]
        drafter = PromptLookupDrafter(Fixed(3), min_ngram=lo, max_ngram=hi, branches=k)
        drafter.reset()
        drafter.prefill(torch.tensor(seq[:5]))
        for t in range(5, len(seq) + 1, rng.randint(1, 3)):  # incremental index, as in decoding
            draft = drafter.propose(_ctx(seq[:t]))
            assert chains(draft) == reference(seq[:t], 3, lo, hi, k), (case, t)


def test_a_context_that_does_not_extend_the_last_one_is_indexed_afresh():
    drafter = PromptLookupDrafter(Fixed(2))
    for tokens in ([4, 5, 6, 4], [4, 5], [7, 8, 7], [7, 9, 7]):  # shorter; another last token
        draft = drafter.propose(_ctx(tokens))
        assert chains(draft) == reference(tokens, 2, 1, 3, 1), tokens


def test_bad_settings_are_refused():
    for kw in ({"min_ngram": 0}, {"min_ngram": 3, "max_ngram": 2}, {"branches": 0}):
        with pytest.raises(BadInput):
            PromptLookupDrafter(Fixed(2), **kw)
    with pytest.raises(BadInput):
        PromptLookupDrafter(None)
    # a tree knob bounded before any drafting: 1 + 300 branches x depth 8 nodes > the 1024 cap
    with pytest.raises(BadInput, match="drafter.branches=300"):
        PromptLookupDrafter(Fixed(8), branches=300)


def test_history_drafts_from_an_earlier_generation():
    drafter = PromptLookupDrafter(Fixed(3), min_ngram=2, history=True)
    drafter.reset()
    drafter.prefill(torch.tensor([1, 2]))
    drafter.propose(_ctx([1, 2, 7, 8, 9, 6]))
    drafter.reset()  # the first generation's output 7 8 9 6 goes into the history
    drafter.prefill(torch.tensor([3, 7, 8]))
    draft = drafter.propose(_ctx([3, 7, 8]))
    assert chains(draft) == [[9, 6]]  # the history's generation ends after 6
    assert drafter.counters() == {"lookup_hits": 1, "lookup_tokens": 2, "lookup_history_hits": 1}
    plain = PromptLookupDrafter(Fixed(3), min_ngram=2)
    plain.reset()
    assert plain.propose(_ctx([3, 7, 8])).num_drafted == 0


# --- exact at T > 0 through the engine -------------------------------------------------------

PROMPT, VOCAB = [0, 1, 2, 0, 1], 3


def watch(drafter: PromptLookupDrafter, seen: set[str]) -> PromptLookupDrafter:
    """Record hits, misses, rejections, full accepts and forks of the runs' steps."""
    observe = drafter.observe

    def watched(ctx, draft, verdict):
        observe(ctx, draft, verdict)
        seen.add("hit" if draft.num_drafted else "miss")
        if draft.num_drafted:
            seen.add("reject" if verdict.num_accepted < len(chains(draft)[0]) else "full")
        if len(children(draft.parent.tolist())[0]) > 1:
            seen.add("fork")

    drafter.observe = watched
    return drafter


@pytest.mark.parametrize("stop_ids", [(), (2,)], ids=["no-stop", "stop-id"])
@pytest.mark.parametrize("branches", [1, 2], ids=["chain", "tree"])
@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_lookup_is_exact_at_positive_temperature(temperature, branches, stop_ids):
    sampling, length, seen = Sampling(temperature=temperature), 5, set()
    verifier = RecursiveRejection() if branches > 1 else Tokenwise()
    for seed in (3, 4):
        target = TableLM(VOCAB, seed, scale=2.5)
        want = truncate_at_stop(ar_joint(target, PROMPT, length, sampling), set(stop_ids))
        for lo, hi in ((1, 2), (2, 3)):  # min_ngram 2: some steps find no match
            drafter = watch(
                PromptLookupDrafter(Fixed(3), min_ngram=lo, max_ngram=hi, branches=branches), seen
            )

            def go(coins, drafter=drafter, target=target):
                return tuple(
                    generate(
                        PROMPT,
                        target,
                        drafter,
                        verifier,
                        sampling=sampling,
                        coins=coins,
                        max_new_tokens=length,
                        stop_ids=stop_ids,
                    ).tokens
                )

            got = enumerate_outcomes(go)
            assert abs(sum(got.values()) - 1.0) < 1e-12
            assert total_variation(got, want) <= 1e-12, (seed, lo, hi)
    assert seen >= {"hit", "miss", "reject", "full"}
    assert ("fork" in seen) == (branches > 1)


def test_lookup_with_history_is_exact_at_positive_temperature():
    sampling, length, seen = Sampling(temperature=1.0), 5, set()
    target = TableLM(VOCAB, 3, scale=2.5)
    want = ar_joint(target, PROMPT, length, sampling)

    def go(coins):
        # a fresh drafter per path, whose history holds one earlier output (0 2 2 1 0 2 1)
        drafter = PromptLookupDrafter(Fixed(3), min_ngram=2, history=True)
        drafter.prefill(torch.tensor([1]))
        drafter.propose(
            Context(tokens=torch.tensor([1, 0, 2, 2, 1, 0, 2, 1]), coins=coins, sampling=sampling)
        )
        out = generate(
            PROMPT,
            target,
            watch(drafter, seen),
            Tokenwise(),
            sampling=sampling,
            coins=coins,
            max_new_tokens=length,
        )
        seen.update({"history"} if out.stats.counters.get("lookup_history_hits") else ())
        return tuple(out.tokens)

    got = enumerate_outcomes(go)
    assert total_variation(got, want) <= 1e-12
    assert seen >= {"hit", "miss", "reject", "full", "history"}


class FrequencyQLookup(PromptLookupDrafter):
    """A planted bug: the draft stays the latest match, but it records as ``q`` the frequency of
    each next token over all matches, as if the token had been drawn from it."""

    def propose(self, ctx: Context) -> Draft:
        draft = super().propose(ctx)
        if draft.num_drafted == 0:
            return draft
        q = torch.zeros(draft.size, VOCAB, dtype=torch.float64)  # [N, V]
        q[:, :] = 1.0 / VOCAB
        ids = ctx.tokens.tolist()
        for s in range(1, len(ids)):
            if ids[s - 1] == ids[-1]:
                q[0, ids[s]] += 1.0
        q[0] /= q[0].sum()
        return Draft(draft.tokens, draft.parent, q)


def test_the_harness_catches_a_lookup_drafter_with_a_made_up_q():
    sampling, length = Sampling(temperature=1.0), 4
    target = TableLM(VOCAB, 3, scale=2.5)
    drafter = FrequencyQLookup(Fixed(2))
    got = enumerate_outcomes(
        lambda coins: tuple(
            generate(
                PROMPT,
                target,
                drafter,
                Tokenwise(),
                sampling=sampling,
                coins=coins,
                max_new_tokens=length,
            ).tokens
        )
    )
    assert total_variation(got, ar_joint(target, PROMPT, length, sampling)) > 1e-3
