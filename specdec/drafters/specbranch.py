"""SpecBranch: branch at the uncertain token, and draft each branch's next round while verifying.

Shen et al. 2025, "SpecBranch: Speculative Decoding via Hybrid Drafting and Rollback-Aware
Branch Parallelism" (ICLR 2026; code github.com/Sylvan820/Specbranch). Symbols: γ_max =
``policy.limit()``; ε = ``threshold``; k_max; the branch count ``k = max(1, ⌊k_max·(1 − q(x_b))⌋)``
at branch point b (``drafters.branch_tree``); H-RAD's class s_t ∈ {0, 1, 2} (``nets.hrad``).

A step (``propose`` → target forward + verifier → ``observe``):

1. **The draft.** PRE (first step, and after a miss): the main lane drafts a branch tree
   serially. Its length is the *hybrid* rule: H-RAD's class (when a head is configured) from the
   target's features at the last verified position + the root's embedding: s = 0 → one token,
   forked there (b = 1); s = 2 → γ_max tokens, every branch continued to γ_max (forking at the
   first token with confidence < ε); s = 1, or no head → the soft stop: the chain ends at its
   first token with confidence < ε, which is the branch point (its k branches are leaves).
   POST (after a hit): the subtree the worker drafted last step below the emitted token (the
   paper's surviving branch); H-RAD's s = 0 trims it to depth 1 ("posterior drafting" can only
   shorten a draft that already exists; s = 2 cannot lengthen it).
2. **The background round** (``drafters.ahead``), during the target's forward: the worker
   continues **every** branch of the proposed tree — each leaf that is not a duplicate or a stop
   id gets its own branch tree (soft stop rule, length γ_max + 1), all grown in one batched draft
   forward per depth. Its guess: the verifier accepts one root-to-leaf path in full and emits as
   the bonus token one of the first tokens the worker drafted under that leaf. The branches
   hedge the uncertain position (PEARL, ``drafters.pearl``, which it extends, guesses one path).
3. **Hand-off** (``observe``): a *hit* when the accepted path ends at a leaf the worker continued
   and its bonus token y is one of that leaf's children there; the next draft is the subtree
   under the first such child (re-rooted at y) and every other worker token is rolled back. A
   *miss* rolls back the whole round and the next step is PRE.

**Lossless at every temperature.** Each proposed tree is verified by the sibling walk
(``verifier=rrs``) with the ``q`` its tokens were drawn from (sampled forks: siblings i.i.d.,
recursive rejection with replacement; top-k forks: ``q = None``, the point-mass rule); why a
data-dependent k keeps that exact is in ``drafters.branch_tree``. A reused subtree was drawn with
the worker's forked coins given ``prefix + leaf + y``: the hit event depends on y and the
worker's first tokens under the leaf, never on the continuations below them, so given the hit the
subtree under y is a fresh branch tree after ``prefix + y`` (as PEARL's block is a fresh chain).
``tests/drafters/test_specbranch_exact.py`` enumerates it exactly through the engine.

Differences from the public code: it forks top-k, lossless only at T = 0; ``branching=sample``
forks i.i.d. draws that RRS verifies exactly at T > 0 (``auto``: top-k at T = 0). One tree is
verified per step, so a worker's branches are verified in the next step's tree; H-RAD's class is
computed once per step from the target's features (no separate posterior re-drafting).

Counters (``specdec.metrics``): ``pre_steps``, ``post_steps``, ``hits``, ``misses``,
``draft_tokens`` (main lane and worker), ``rolled_back`` (proposed tokens not accepted, worker
tokens not reused), ``branches`` (leaves of every proposed tree; ``branches_per_step`` in
summaries), ``hrad_0``..``hrad_2`` (H-RAD's classes, with a head).
"""

from __future__ import annotations

from collections import Counter
from functools import partial

import torch

from specdec.core import Context, Draft, Drafter, TargetView, Verdict
from specdec.drafters.ahead import Ahead
from specdec.drafters.branch_tree import BranchGrower, BranchRule, leaves
from specdec.drafters.draft_cuts import ancestors, extract, trim
from specdec.drafters.hrad_checks import load_head, warn_temperature
from specdec.drafters.limits import check_nodes
from specdec.drafters.policies import Policy
from specdec.drafters.tree import TreeGrower
from specdec.errors import BadInput
from specdec.lm import CachedLM
from specdec.metrics import BRANCHES, DRAFT_TOKENS, HITS, MISSES, ROLLED_BACK
from specdec.models.placement import Held, Placement, drafter_modules
from specdec.nets.hrad.features import StepFeatures
from specdec.nets.hrad.head import HradHead, check_target
from specdec.sampling_params import Sampling
from specdec.trees import depths

BRANCHINGS = ("auto", "sample", "topk")


class SpecBranchDrafter(Drafter):
    """SpecBranch's hybrid-length branch trees with a background round per step.

    Args:
        lm: the draft model with its cache.
        policy: ``policy.limit()`` is γ_max (the worker's branches reach γ_max + 1 below a leaf).
        threshold: ε, the confidence below which a drafted token is the branch point.
        k_max: the most branches at a branch point (1: a chain, ``specbranch_no_branch``).
        branching: ``sample`` (i.i.d. forks, ``q`` given), ``topk`` (``q = None``) or ``auto``
            (top-k at temperature 0, sampled otherwise).
        hrad: path of an H-RAD head (``learners.hrad``), or ``None`` for the soft stop alone.
        mode: the worker's mode (``drafters.ahead``: ``auto``, ``thread`` or ``inline``).
        lane: the worker's lane in the forward log.
        placement: the pair's (``specdec.models.placement``): the H-RAD head reads the
            target's features, so it goes to the target's device (in its own dtype).

    The forks are warped with the step's sampling (``ctx.sampling``, the target's).
    """

    makes_trees = True

    def __init__(
        self,
        lm: CachedLM,
        policy: Policy,
        *,
        threshold: float = 0.5,
        k_max: int = 3,
        branching: str = "auto",
        hrad: str | None = None,
        mode: str = "auto",
        lane: str = "specbranch",
        placement: Placement | None = None,
    ) -> None:
        if lm is None:
            raise BadInput("specbranch needs a draft model: set model=<pair> with a draft")
        if not 0.0 <= threshold <= 1.0 or k_max < 1:
            raise BadInput(
                f"need 0 <= drafter.threshold <= 1 and drafter.k_max >= 1, got "
                f"{threshold} and {k_max}"
            )
        if branching not in BRANCHINGS:
            raise BadInput(f"drafter.branching={branching!r}; use one of {list(BRANCHINGS)}")
        self.lm, self.policy, self.branching = lm, policy, branching
        self.threshold, self.k_max = float(threshold), int(k_max)
        # no vocabulary bound: i.i.d. forks (branching=sample) may repeat a token
        gamma = policy.longest()  # k_max branches, each as long as the chain at most
        check_nodes(
            1 + self.k_max * gamma,
            what=f"drafter.k_max={k_max} branches of length {gamma}",
            fix="drafter.k_max or the policy's draft length",
        )
        self.models = [lm]
        self.head: HradHead | None = None
        if hrad is not None:
            self.head = load_head(hrad, policy.limit(), placement)  # warns on another γ_max
            self.target_layers = tuple(range(-int(self.head.meta["layers"]), 0))
        self.hrad, self.checked = hrad, set()  # the temperatures compared with H-RAD's labels
        self.features, self.view = StepFeatures(), None
        self.ahead: Ahead[tuple] = Ahead(lane, device=lm.device, threads=lm.threads, mode=mode)
        self._next, self._counts = None, Counter()  # the worker's subtree; counters()

    def attach(self, target: TargetView) -> None:
        if self.head is not None:
            check_target(
                self.head.meta,
                target,
                where="drafter.hrad",
                experiment=self.head.meta.get("experiment", "hrad_<model>"),
            )
        self.view = target

    def prefill(self, prompt: torch.Tensor, features: torch.Tensor | None = None) -> None:
        self.features.prefill(features)
        super().prefill(prompt, None)

    def reset(self) -> None:
        self.ahead.discard()  # a generation that failed mid-step may leave a job running
        self.lm.reset()
        self.policy.reset()
        self.features = StepFeatures()
        self._next, self._counts = None, Counter()

    def counters(self) -> dict[str, int]:
        return dict(self._counts)

    def modules(self) -> dict[str, Held]:
        head = {} if self.head is None else {"drafter.hrad": Held("features", self.head)}
        return {**drafter_modules(self), **head}

    def hrad_class(self, ctx: Context) -> int | None:
        """H-RAD's class for the draft rooted at ``ctx.root`` (``None``: no head, or no verified
        position yet)."""
        if self.head is None:
            return None
        assert self.view is not None, "attach() runs before propose()"
        z = self.features(ctx, self.view)  # [D] or None
        if z is None:
            return None
        cls = int(self.head.predict(z).argmax())
        self._counts[f"hrad_{cls}"] += 1
        return cls

    def rule(self, cls: int | None, depth: int) -> BranchRule:
        """The branch rule of a draft of at most ``depth`` tokens under H-RAD's class ``cls``."""
        if cls == 0:  # all-reject: one token, forked
            return BranchRule(min(depth, 1), self.threshold, self.k_max, True, fork_first=True)
        if cls == 2:  # all-accept: γ_max tokens, every branch continued
            return BranchRule(depth, self.threshold, self.k_max, stop_at_branch=False)
        return BranchRule(depth, self.threshold, self.k_max, stop_at_branch=True)

    def topk_at(self, sampling: Sampling) -> bool:
        """Forks are the top-k (``q = None``): ``topk``, or ``auto`` at T = 0; else i.i.d."""
        return self.branching == "topk" or (self.branching == "auto" and not sampling.temperature)

    def check_labels(self, sampling: Sampling) -> None:
        """Warn once per temperature other than the labels' (acceptance lengths depend on it)."""
        if self.head is None or sampling.temperature in self.checked:
            return
        self.checked.add(sampling.temperature)
        warn_temperature(self.head, self.hrad, sampling.temperature)

    def propose(self, ctx: Context) -> Draft:
        self.check_labels(ctx.sampling)
        gamma = max(0, min(self.policy.limit(), ctx.budget - 1))
        cls = self.hrad_class(ctx)
        draft, self._next = self._next, None
        if draft is not None:  # 1. POST: the worker's subtree under the emitted token
            self._counts["post_steps"] += 1
            if cls == 0:
                draft = trim(draft, 1)
        else:  # 1. PRE: the main lane drafts a branch tree serially
            self._counts["pre_steps"] += 1
            draft = self._grow(ctx, [ctx.root], [-1], [(0, self.rule(cls, gamma))], ctx.coins)
            self._counts[DRAFT_TOKENS] += draft.num_drafted
        assert int(draft.tokens[0]) == ctx.root, "a kept subtree must start with the emitted token"
        self._counts[BRANCHES] += len(leaves(draft.parent.tolist()))
        # 2. The worker continues every branch of the draft (soft stop rule).
        tokens, parent = draft.tokens.tolist(), draft.parent.tolist()
        depth = depths(parent)
        heads = []
        for leaf in leaves(parent):
            room = min(gamma, ctx.budget - depth[leaf] - 2) + 1  # the next draft's + its root
            duplicate = any(
                tokens[s] == tokens[leaf] and s < leaf
                for s in range(1, len(tokens))
                if parent[s] == parent[leaf]
            )
            if room >= 2 and tokens[leaf] not in ctx.stop_ids and not duplicate:
                heads.append((leaf, self.rule(None, room)))
        if heads:
            coins = ctx.coins.fork(("specbranch", ctx.step, int(ctx.tokens.numel())))
            self.ahead.submit(
                ctx.step, partial(self._grow_round, ctx, tokens, parent, heads, coins)
            )
        return draft

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        # 1. Join the worker (raises BackgroundError naming the step if its job failed).
        round_ = self.ahead.take()
        self.policy.observe(draft.num_drafted, verdict.num_accepted)
        rolled = draft.num_drafted - verdict.num_accepted
        if round_ is not None:
            tree, added = round_
            self._counts[DRAFT_TOKENS] += added
            # 2. Hit: the accepted path ends at a leaf, and y is one of its worker children.
            end = verdict.path[-1] if verdict.path else 0
            parent = tree.parent.tolist()
            kids = [
                c
                for c in range(draft.tokens.numel(), len(parent))
                if parent[c] == end and int(tree.tokens[c]) == verdict.token
            ]
            if kids:
                self._counts[HITS] += 1
                self._next = extract(tree, kids[0])
                rolled += added - int(self._next.tokens.numel())
            else:  # 3. Miss: the whole round is rolled back.
                self._counts[MISSES] += 1
                rolled += added
        self._counts[ROLLED_BACK] += rolled

    def _grow(
        self,
        ctx: Context,
        tokens: list[int],
        parent: list[int],
        heads: list[tuple[int, BranchRule]],
        coins,
        extra: list[int] = (),
    ) -> Draft:
        grower = TreeGrower(self.lm, ctx.tokens.tolist())
        bg = BranchGrower(
            grower,
            tokens,
            parent,
            ctx.sampling,
            topk=self.topk_at(ctx.sampling),
            coins=coins,
            stop_ids=ctx.stop_ids,
        )
        bg.grow(heads, extra)
        grower.close()
        return Draft(torch.tensor(tokens), torch.tensor(parent), bg.q(self.lm.vocab_size))

    def _grow_round(
        self,
        ctx: Context,
        tokens: list[int],
        parent: list[int],
        heads: list[tuple[int, BranchRule]],
        coins,
    ) -> tuple[Draft, int]:
        """The worker's job: the draft tree with a branch tree below each head (their ancestors
        are scored in its first forward). Returns the grown tree and how many tokens it added."""
        n = len(tokens)
        head_ids = {h for h, _ in heads}
        above = sorted({a for h in head_ids for a in ancestors(parent, h)} - {0})
        tree = self._grow(ctx, list(tokens), list(parent), heads, coins, above)
        return tree, int(tree.tokens.numel()) - n
