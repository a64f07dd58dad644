"""HybridDrafter: prompt-lookup matches and a feature drafter's candidates in one verified tree.

Prompt lookup (``drafters.lookup``) drafts well where the output copies the context (summaries,
RAG, multi-turn) and a feature drafter (EAGLE-3, ``drafters.eagle3``; SpecBlock,
``drafters.specblock``) where it cannot (math, QA). Retrieval and model drafts in one step follow
SAM-Decoding (Hu et al. 2024, arXiv 2411.10666) and REST (He et al. 2023, arXiv 2311.08252); here
both go into one EAGLE-2-style tree (Li et al. 2024, arXiv 2406.16858) under one node budget.
Each step:

1. the lookup drafter proposes its matches' continuations (up to ``branches`` matches with
   distinct next tokens, ``lookup_depth`` tokens each), and each match's suffix-match length
   ``L`` is measured (up to ``max_length``);
2. the gate (``drafters.hybrid_gate``, ``gate: auto``) skips the model for this step when the best
   chain's expected accepted length beats the model's running added tokens per step by
   ``gate_tokens``: no model forward runs, the step's verified positions wait for the next
   catch-up. Otherwise the feature drafter catches up on the verified positions (those held
   included, in one forward) and grows its candidate tree with its own expansion rule
   (``FeatureDrafter.catch_up`` and ``_grow``), each candidate scored by its draft path
   probability ``p``;
3. both go into one trie (``drafters.merge``: shared prefixes merge); a node's estimate of being
   accepted is the larger of ``min(1, k p)`` (model; ``k`` the running calibration) and
   ``prod_j r(L, j)`` (lookup; running per-length, per-depth rates), capped by its parent's
   (``drafters.acceptance``);
4. the ``n`` best nodes are kept (ancestors included): ``n = total_tokens`` (``budget: static``)
   or the count maximising expected tokens per second under a verify cost table (``budget:
   cost``, ``drafters.budget``); ``observe`` updates the rates and the calibration with the
   verdict.

So a long match that keeps being accepted wins budget over a weak model branch, and a confident
model branch over a short match that keeps failing.

**Exactness.** The tree (and the gate's choice) is a deterministic function of the context and of
the verdicts of past steps (through the running estimates), never of this step's coins, so
``q = None`` and the point-mass tree rules (``rrs``, ``hsd``) verify it exactly, as every
deterministic tree drafter.

The two sub-drafters are built by the hybrid from their own configs (``model``, ``lookup``:
partial constructors: the model one takes ``policy`` and ``placement`` and gets the hybrid's policy
(the model tree's depth), the lookup one a ``Fixed(lookup_depth)`` policy. Neither holds the
sampling: every step reads it from ``Context.sampling``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from specdec.core import Context, Draft, Drafter, TargetView, Verdict
from specdec.drafters.acceptance import LookupRates, ModelCalibration
from specdec.drafters.budget import NodeBudget, VerifyCost
from specdec.drafters.candidates import Candidates
from specdec.drafters.features import FeatureDrafter
from specdec.drafters.hybrid_gate import ModelGate
from specdec.drafters.limits import check_nodes
from specdec.drafters.lookup import PromptLookupDrafter
from specdec.drafters.merge import MergedTree
from specdec.drafters.policies import Fixed, Policy
from specdec.errors import BadInput
from specdec.models.placement import Held, Placement
from specdec.trees import children


def match_length(source: list[int], start: int, tokens: list[int], cap: int) -> int:
    """How many tokens before ``source[start]`` equal the last ones of ``tokens`` (at most
    ``cap``): the length of the suffix match whose continuation starts at ``start``."""
    n = 0
    while (
        n < cap
        and n < len(tokens)
        and start - 1 - n >= 0
        and source[start - 1 - n] == tokens[-1 - n]
    ):
        n += 1
    return n


class HybridDrafter(Drafter):
    """Lookup and feature-drafter candidates merged into one tree under one node budget.

    Args:
        policy: the model tree's depth cap (``policy.limit()``).
        model: the feature drafter's constructor (``policy, placement``).
        lookup: the lookup drafter's constructor (``policy``; its ``branches`` matches).
        lookup_depth: tokens drafted along each match.
        total_tokens: nodes kept per step with ``budget: static``.
        budget: ``static`` or ``cost`` (``drafters.budget``).
        max_tokens: the most nodes ``budget: cost`` keeps.
        costs: the verify cost table for ``budget: cost`` (``cost(role, n, context)``).
        max_length: match lengths above it share their rates.
        prior: the prior acceptance rate of a lookup node.
        discount: per-step decay of the running counts.
        persist: keep the running estimates across generations (else each starts afresh).
        gate: ``auto`` (skip the model tree when a lookup chain is trusted) or ``off``.
        gate_tokens: the best chain's expected tokens over the model's added tokens to skip.
        placement: the pair's, handed to the feature drafter.
    """

    makes_trees = True
    reads_target = True

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        model: Callable[..., Drafter],
        lookup: Callable[..., Drafter],
        lookup_depth: int = 8,
        total_tokens: int = 8,
        budget: str = "static",
        max_tokens: int = 16,
        costs: VerifyCost | None = None,
        max_length: int = 6,
        prior: float = 0.5,
        discount: float = 0.98,
        persist: bool = False,
        gate: str = "auto",
        gate_tokens: float = 0.0,
        placement: Placement | None = None,
    ) -> None:
        if policy is None:
            raise BadInput("the hybrid drafter needs a policy: set drafter/policy=fixed")
        if lookup_depth < 1 or max_length < 1 or not 0 < prior < 1 or not 0 < discount <= 1:
            raise BadInput(
                f"need drafter.lookup_depth >= 1, drafter.max_length >= 1, 0 < "
                f"drafter.prior < 1 and 0 < drafter.discount <= 1, got {lookup_depth}, "
                f"{max_length}, {prior}, {discount}"
            )
        self.model = model(policy=policy, placement=placement)
        self.lookup = lookup(policy=Fixed(lookup_depth))
        if not isinstance(self.model, FeatureDrafter):
            raise BadInput(
                f"drafter.model must be a feature drafter (EAGLE-3 or SpecBlock), got "
                f"{type(self.model).__name__}"
            )
        if not isinstance(self.lookup, PromptLookupDrafter):
            raise BadInput(
                f"drafter.lookup must be a prompt lookup drafter, got {type(self.lookup).__name__}"
            )
        self.budget = NodeBudget(budget, total_tokens, max_tokens, costs)
        check_nodes(
            1 + self.budget.largest,
            what=f"drafter.total_tokens={total_tokens} / drafter.max_tokens={max_tokens}",
            fix="them",
        )
        self.policy, self.lookup_depth = policy, int(lookup_depth)
        self.max_length, self.prior, self.discount = int(max_length), float(prior), float(discount)
        self.persist = bool(persist)
        self.gate = ModelGate(gate, gate_tokens, self.discount)
        self.models = self.model.models
        self.target_layers = self.model.target_layers
        self._fresh_estimates()
        self.reset()

    def _fresh_estimates(self) -> None:
        self.rates = LookupRates(
            self.max_length, self.lookup_depth, self.prior, discount=self.discount
        )
        self.calibration = ModelCalibration(discount=self.discount)
        self.gate.fresh()

    def modules(self) -> dict[str, Held]:
        return self.model.modules()

    def reset(self) -> None:
        self.model.reset()
        self.lookup.reset()
        self.gate.reset()
        if not self.persist:
            self._fresh_estimates()
        self._last: tuple[list[int], MergedTree, list[int], bool] | None = None
        self._counts = {
            "hybrid_gated": 0,
            "hybrid_kept": 0,
            "hybrid_candidates": 0,
            "hybrid_lookup_nodes": 0,
            "hybrid_model_nodes": 0,
            "hybrid_lookup_accepted": 0,
            "hybrid_model_accepted": 0,
        }

    def attach(self, target: TargetView) -> None:
        self.model.attach(target)

    def prefill(self, prompt: torch.Tensor, features: torch.Tensor | None = None) -> None:
        self.model.prefill(prompt, features)
        self.lookup.prefill(prompt)

    # --- the step -----------------------------------------------------------------------------
    def _chains(self, ctx: Context) -> list[tuple[list[int], int]]:
        """Step 1: each match's chain (root child order: the matches') and its match length."""
        draft = self.lookup.propose(ctx)
        if draft.num_drafted == 0:
            return []
        tokens, kids = draft.tokens.tolist(), children(draft.parent.tolist())
        ids = ctx.tokens.tolist()
        chains = []
        for (source, start), node in zip(self.lookup.matches(ctx.tokens), kids[0], strict=True):
            chain = [tokens[node]]
            while kids[node]:
                node = kids[node][0]
                chain.append(tokens[node])
            chains.append((chain, match_length(source, start, ids, self.max_length)))
        return chains

    def _model_tree(self, ctx: Context) -> Candidates | None:
        """Step 2: the feature drafter's candidates after catching up on every held position
        (``None`` before a verified position)."""
        self.model.catch_up(replace(ctx, target_features=self.gate.release(ctx.target_features)))
        depth_limit = min(self.policy.limit(), ctx.budget - 1)
        if self.model._verified() == 0 or depth_limit < 1:
            return None
        tree = Candidates()
        self.model._grow(tree, ctx, depth_limit)
        return tree

    def propose(self, ctx: Context) -> Draft:
        logged = [len(m.forward_log) for m in self.models]
        chains = self._chains(ctx)  # 1. the lookup chains
        # 2. The gate: the best chain's expected accepted length against the model's added tokens.
        paths = [self.rates.path(length, len(chain)) for chain, length in chains]
        gated = self.gate.skip(max((sum(p) for p in paths), default=0.0))
        tree = MergedTree()
        if gated:
            self.gate.hold(ctx.target_features)
            self._counts["hybrid_gated"] += 1
        elif (model_tree := self._model_tree(ctx)) is not None:
            tree.add_model(model_tree)
        for k, ((chain, _), path) in enumerate(zip(chains, paths)):
            tree.add_chain(chain, path, k)
        # 3. One score per node; 4. the budget's count of the best.
        cands, est = tree.candidates(self.calibration.estimate)
        ranked = sorted(est, reverse=True)
        draft_s = 0.0 if self.budget.mode == "static" else self._draft_seconds(logged)
        n = self.budget.choose(ranked, int(ctx.tokens.numel()) - 1, draft_s)
        kept = cands.best(n)
        self._last = (kept, tree, [length for _, length in chains], gated)
        self._counts["hybrid_kept"] += len(kept)
        self._counts["hybrid_candidates"] += len(tree)
        return cands.to_draft(ctx.root, kept)

    def _draft_seconds(self, logged: list[int]) -> float:
        """The step's draft forwards, priced by the cost table where it knows their role, else
        at their measured seconds."""
        total = 0.0
        for lm, start in zip(self.models, logged):
            for f in lm.forward_log[start:]:
                try:
                    total += self.budget.costs.cost(f.role, f.new_tokens, f.context)
                except (KeyError, ValueError):
                    total += f.seconds
        return total

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        # the sub-drafters' observe only feeds the policy: the hybrid feeds it once
        self.policy.observe(draft.num_drafted, verdict.num_accepted)
        if self._last is None:
            return
        kept, tree, lengths, gated = self._last
        accepted = {kept[j - 1] for j in verdict.path}  # draft node j is candidate kept[j - 1]
        # 1. Model calibration: the kept model nodes' predicted and accepted counts (a gated step
        #    has none and leaves the calibration, and the gate's own count, as they were).
        model_nodes = [i for i in kept if tree.model[i] is not None]
        if not gated:
            self.calibration.update(
                sum(tree.model[i] for i in model_nodes), sum(i in accepted for i in model_nodes)
            )
        # 2. Lookup rates: each match's kept chain (kept is in depth order).
        for k, length in enumerate(lengths):
            self.rates.update(length, [i in accepted for i in kept if tree.chain[i] == k])
        lookup_nodes = [i for i in kept if tree.chain[i] is not None]
        self._counts["hybrid_lookup_nodes"] += len(lookup_nodes)
        self._counts["hybrid_model_nodes"] += len(model_nodes)
        self._counts["hybrid_lookup_accepted"] += sum(i in accepted for i in lookup_nodes)
        self._counts["hybrid_model_accepted"] += sum(i in accepted for i in model_nodes)
        if not gated:  # 3. The gate: accepted nodes only the model proposed
            self.gate.update(sum(i in accepted and tree.chain[i] is None for i in model_nodes))

    def counters(self) -> dict[str, int]:
        return {
            **self.model.counters(),
            **self.lookup.counters(),
            **{k: v for k, v in self._counts.items() if v},
        }
