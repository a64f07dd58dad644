"""PromptLookupDrafter: draft-free n-gram drafting from the context (prompt lookup decoding).

Prompt lookup decoding (Saxena 2023, "Prompt Lookup Decoding"; transformers'
``prompt_lookup_num_tokens``; vLLM's ``ngram`` proposer; Spec-Bench's PLD): the last ``n`` committed
tokens are searched for earlier in the context (prompt + text so far), and the tokens that followed
the match are the draft. No draft model runs, so where the output copies from the prompt
(summarisation, RAG, code edits) drafting is almost free.

Match rule: ``n`` from ``max_ngram`` down to ``min_ngram``, the longest ``n`` with a match wins, and
among its matches the most recent one (transformers takes the earliest; recent text predicts the
continuation better in long generations). No match: the empty draft (an AR step).

Trees (``branches: k > 1``): the root's children are the distinct next tokens of up to ``k``
matches, collected longest ``n`` first and most recent first within an ``n``; each child continues
along its own match. The draft is a deterministic function of the committed tokens (and, with
``history``, of earlier generations), never of this step's coins, so ``q=None``: tokenwise
verification accepts ``x`` with ``p(x)`` and resamples from ``p`` with ``x`` zeroed, and ``rrs``
verifies the tree's distinct siblings without replacement; both are exact at any temperature.

Search: ``NgramIndex`` (``specdec.drafters.ngram_index``) indexes every n-gram of the context
with the latest position that followed it per distinct next token, in memory linear in the
context (a lazily built trie), and is updated with the tokens each step commits, so a step costs
a few dict operations plus the new tokens' n-grams; building it for a 2k-token prompt costs a few
ms once, inside the prefill. A vectorised search (``unfold`` + compare over the context, per n)
cost 0.07-0.4 ms per step on a 2k-token context on this CPU, so the index wins after a few dozen
steps; both are far below a target forward (~25 ms for SmolLM2 on this CPU). ``max_ngram`` is
capped at ``MAX_NGRAM`` (64) and ``branches`` at ``MAX_BRANCHES`` (64), refused above.

History (``history: true``): the outputs of the drafter's earlier generations go into a second
index that ``reset`` keeps, searched after the context (vLLM/SuffixDecoding-style output cache);
it keeps at most ``MAX_HISTORY_TOKENS`` (65536) tokens, the oldest generations leaving first.
"""

from __future__ import annotations

import torch

from specdec.core import LM, Context, Draft, Drafter, Verdict
from specdec.drafters.limits import check_nodes
from specdec.drafters.ngram_index import (
    MAX_HISTORY_TOKENS,
    NgramIndex,
    check_branches,
    check_lookup,
)
from specdec.drafters.policies import Policy
from specdec.errors import BadInput

#: separates generations in the history index (no real token id; n-grams across it never match)
SEPARATOR = -1


class PromptLookupDrafter(Drafter):
    """Drafts the continuation of the latest longest n-gram match in the context (no draft model).

    Args:
        policy: ``policy.limit()`` is the most tokens a chain (a tree's depth) may hold.
        max_ngram, min_ngram: n-gram sizes searched, longest first (``1 <= min <= max``).
        branches: root children of the draft (1: a chain; k > 1: a tree of up to k matches with
            distinct next tokens, verified by ``rrs``).
        history: also search the outputs of earlier generations (kept across ``reset``).

    No draft model and no sampling: the draft is deterministic (``q=None``).
    """

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        max_ngram: int = 3,
        min_ngram: int = 1,
        branches: int = 1,
        history: bool = False,
    ) -> None:
        if policy is None:
            raise BadInput("the lookup drafter needs a policy: set drafter/policy=fixed")
        check_lookup(max_ngram, min_ngram, branches)  # integers, 1 <= min <= max <= the cap
        depth = policy.longest()  # each branch follows its own match to the draft length
        check_nodes(
            1 + int(branches) * depth,
            what=f"drafter.branches={branches} x depth {depth}",
            fix="drafter.branches or drafter.policy.gamma",
        )
        check_branches(branches)
        self.policy, self.max_ngram, self.min_ngram = policy, int(max_ngram), int(min_ngram)
        self.branches, self.makes_trees = int(branches), branches > 1
        self.models: tuple[LM, ...] = ()
        self.past = NgramIndex(self.min_ngram, self.max_ngram) if history else None
        self.index = NgramIndex(self.min_ngram, self.max_ngram)
        self.prompt_len = 0
        self.reset()

    def reset(self) -> None:
        if self.past is not None and len(self.index.ids) > self.prompt_len:
            self.past.extend([*self.index.ids[self.prompt_len :], SEPARATOR])
            if len(self.past) > MAX_HISTORY_TOKENS:  # the oldest generations leave, half at once
                self.past = self.past.tail(MAX_HISTORY_TOKENS // 2, SEPARATOR)
        self.policy.reset()
        self.index = NgramIndex(self.min_ngram, self.max_ngram)
        self.seen = torch.empty(0, dtype=torch.long)  # [T] the tokens indexed (the last context)
        self.prompt_len = 0
        self._counts = {"lookup_hits": 0, "lookup_misses": 0, "lookup_tokens": 0}
        if self.past is not None:
            self._counts["lookup_history_hits"] = 0

    def prefill(self, prompt: torch.Tensor, features: torch.Tensor | None = None) -> None:
        """Index the prompt (``[T]``) once, inside the engine's timed prefill."""
        self.prompt_len = int(prompt.numel())
        self._catch_up(prompt)

    def _catch_up(self, tokens: torch.Tensor) -> None:
        """Index the committed tokens ``[T]`` not indexed yet.

        In decoding they extend the indexed ones (one tensor comparison checks it, a few us); a
        context that does not (a caller that skipped ``reset``) is indexed afresh.
        """
        have = len(self.index.ids)
        seen, self.seen = self.seen, tokens
        if have and (tokens.numel() < have or not torch.equal(tokens[:have], seen[:have])):
            self.index, have = NgramIndex(self.min_ngram, self.max_ngram), 0
        if tokens.numel() > have:
            self.index.extend(tokens[have:].tolist())

    def matches(self, tokens: torch.Tensor) -> list[tuple[list[int], int]]:
        """Up to ``branches`` matches with distinct next tokens, as ``(source ids, next position)``:
        the context's first (longest n first, most recent first), then the history's."""
        self._catch_up(tokens)
        suffix = self.index.ids[-self.max_ngram :]
        picked: list[tuple[list[int], int]] = []
        firsts: set[int] = set()
        sources = [self.index] if self.past is None else [self.index, self.past]
        for source in sources:
            for start in source.candidates(suffix):
                first = source.ids[start]
                if first not in firsts and first != SEPARATOR:
                    firsts.add(first)
                    picked.append((source.ids, start))
                    if len(picked) == self.branches:
                        return picked
        return picked

    def propose(self, ctx: Context) -> Draft:
        depth = min(self.policy.limit(), ctx.budget - 1)
        found = self.matches(ctx.tokens) if depth > 0 else []
        tokens, parent = [ctx.root], [-1]
        for ids, start in found:
            # each match's continuation hangs off the root as its own chain, cut after a stop id
            node = 0
            for tok in ids[start : start + depth]:
                if tok == SEPARATOR:
                    break
                tokens.append(tok)
                parent.append(node)
                node = len(tokens) - 1
                if tok in ctx.stop_ids:
                    break
        drafted = len(tokens) - 1
        self._counts["lookup_hits" if drafted else "lookup_misses"] += 1
        self._counts["lookup_tokens"] += drafted
        if self.past is not None and any(ids is self.past.ids for ids, _ in found):
            self._counts["lookup_history_hits"] += 1
        return Draft(torch.tensor(tokens, dtype=torch.long), torch.tensor(parent), None)

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        self.policy.observe(draft.num_drafted, verdict.num_accepted)

    def counters(self) -> dict[str, int]:
        return {k: v for k, v in self._counts.items() if v}
