"""SpecBlockBanditDrafter: SpecBlock whose draft, step by step, is chosen by a cost-aware bandit.

The SpecBlock paper ("Block-Iterative Speculative Decoding with Dynamic Tree Drafting", §3.4) runs
a bandit per query over *weight updates* of the drafter (skip /
update the output heads / update the full drafter, rewarded by the throughput gain net of the
update's cost). Its public code (github.com/shiweijiezero/SpecBlock) has no bandit, and this
project does
no serving-time training; this module is the project's own design, with the same three-way action
split applied to what a step spends on drafting (the bandit-over-configurations line of work the
paper cites, Hou et al. 2025). Arms (``arms``: name -> ``TreeShape`` overrides, or ``null``):

* ``skip`` (``null``): skip the drafter's update. No draft forward runs: the last step's verified
  positions (``Context.target_features``) are held back instead of being appended to the block
  cache, and the draft is the root alone, so the target verifies one token and emits exactly one
  (an AR step). The next drafting step appends every held position in its one catch-up forward
  (one forward of ``n`` positions, charged to that step: its forward log holds it);
* ``head``: the rank head's top-1 chain of block 1 (``widths [1, 1, 1, 0]``: one token per slot,
  the give-up class still truncates; root width 1; at most ``total_tokens: 4``; no block 2): the
  cheapest drafting step and the smallest verification;
* ``full``: the drafter's own rank-guided tree (its ``widths``, ``root_width``, ``total_tokens``,
  ``max_blocks``, ``beam``).

**Reward** of a step = emitted tokens (accepted + 1) / its modeled time, the seconds of the step's
model forwards only (the catch-up and block-2 forwards in the drafter's log since ``propose``, plus
the target's verification, ``TargetView.last_forward``): measured per forward (``costs: null``,
default) or a linear model (``costs: {role: [a, b]}``); see ``drafters.bandit.StepClock``. The
measured default is used because the eval's fitted cost table exists only after the run
(``bench.costfit``, which the library does not import), while every forward's own seconds are the
very samples that table is fitted on; wall time outside forwards (tree building, verification
arithmetic) is excluded by construction. The arm's value is the mean per-step reward (a mean of
ratios: the arm's throughput when its step time varies little, which holds since the arm fixes the
tree size). **Rule**: discounted UCB on rewards normalised by the largest seen
(``drafters.bandit.DiscountedUCB``), optionally per context bucket: ``context_edges`` bucket the
accepted length of the last drafting step (``[1, 3]``: 0 / 1-2 / 3+; a generation starts in the
top bucket, so it drafts before it knows better). The statistics persist across generations
(``persist: true``: a server learns on its stream; counters are per generation either way).

**Exactness.** The arm of step ``t`` is a function of the bandit's statistics (rewards of steps
``< t``: past verdicts and past forward times), of the context bucket (the last drafting step's
verdict) and, with ``explore > 0``, of a draw from ``ctx.coins.fork(("bandit", t))`` -- a stream
independent of the draws the verifier makes at step ``t``. Given the arm, the draft is the
deterministic tree of ``SpecBlockDrafter`` (or the root alone), which the point-mass tree rules
verify exactly: conditionally on everything before step ``t`` and on the arm, the tokens step ``t``
emits follow the target. The arm being chosen before the step's verification coins are drawn and
independently of them, the mixture over arms is exact too, and by induction over steps so is the
whole generation. ``tests/drafters/test_specblock_bandit.py`` checks it by exact enumeration
through the real engine, with random arms enumerated alongside the verifier's coins. Measured
costs make the arm sequence (so the tokens at T > 0) depend on the machine's timing, not on the
seed alone; pass ``costs`` for seed-reproducible runs. The counter ``bandit_timed_steps`` (steps
rewarded with measured seconds) is in every record, so a run that is not a function of its seed
says so.

**Deferred cost.** A skip step saves its catch-up only until the next drafting step appends the
held positions. That catch-up forward is therefore split by positions: each skip step is charged
``price · (positions it held) / (positions appended)`` and its past reward is revised to tokens /
(its seconds + that share) (``DiscountedUCB.revise``, at its discounted weight); the drafting step
keeps the rest. So every arm pays for the work it causes, the per-arm microseconds add up to the
priced forwards, and after a run of skips an exploring head/full step is not charged for them.
Positions still held when the generation ends were never appended and cost nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import torch

from specdec.core import Context, Draft, Verdict
from specdec.drafters.bandit import DiscountedUCB, StepClock
from specdec.drafters.bandit_arms import DEFAULT_ARMS, arm_shape
from specdec.drafters.policies import Policy
from specdec.drafters.specblock import SpecBlockDrafter
from specdec.errors import BadInput
from specdec.models.placement import Placement


@dataclass(frozen=True)
class Deferred:
    """A skip step whose held positions await a catch-up: its arm, context, the rule's update
    number right after it (``at``), its tokens and seconds, and the positions it held."""

    arm: int
    context: int
    at: int
    tokens: int
    seconds: float
    positions: int


class SpecBlockBanditDrafter(SpecBlockDrafter):
    """SpecBlock with a per-step arm (skip / head-only / full tree) chosen by discounted UCB.

    Args (the others are ``SpecBlockDrafter``'s; they shape the ``full`` arm):
        arms: name -> tree-setting overrides (``{}``: the drafter's own tree) or ``None`` (skip).
        discount: the bandit's ``γ`` (memory ``1 / (1 - γ)`` steps; 1 = UCB1).
        exploration: the confidence bonus weight ``c``.
        explore: probability of a uniform random arm (drawn from coins forked per step).
        context_edges: accepted-length edges of the context buckets (``[]``: no context).
        costs: ``None`` (measured forward seconds) or ``{role: [a, b]}`` (``a + b·n`` seconds).
        persist: keep the bandit's statistics across generations (``reset`` keeps them).
    """

    def __init__(
        self,
        policy: Policy,
        path: str,
        arms: Mapping[str, Mapping | None] | None = None,
        discount: float = 0.99,
        exploration: float = 0.5,
        explore: float = 0.0,
        context_edges: Sequence[int] = (),
        costs: Mapping | None = None,
        persist: bool = True,
        widths: Sequence[int] = (1, 2, 3, 0),
        root_width: int | None = 3,
        total_tokens: int = 8,
        max_blocks: int = 1,
        beam: int = 2,
        experiment: str = "specblock_<model>",
        placement: Placement | None = None,
    ) -> None:
        arms = DEFAULT_ARMS if arms is None else arms
        if len(arms) < 1:
            raise BadInput("drafter.arms is empty; give at least one arm (e.g. full: {})")
        self.arm_names = [str(name) for name in arms]
        self.edges = sorted(int(e) for e in context_edges)
        self.rule = DiscountedUCB(
            len(arms),
            discount=discount,
            exploration=exploration,
            explore=explore,
            contexts=len(self.edges) + 1,
        )
        self.clock, self.persist = StepClock(costs), bool(persist)
        super().__init__(
            policy,
            path,
            widths=widths,
            root_width=root_width,
            total_tokens=total_tokens,
            max_blocks=max_blocks,
            beam=beam,
            experiment=experiment,
            placement=placement,
        )
        self.shapes = [arm_shape(self.shape, name, spec) for name, spec in arms.items()]
        for shape in self.shapes:
            if shape is not None:
                shape.check_vocab(int(self.net.token_map.numel()))

    def reset(self) -> None:
        super().reset()
        if not self.persist:
            self.rule.reset()
        self.held: torch.Tensor | None = None  # [n, k, H] verified positions skip steps held
        self.context = len(self.edges)  # the top bucket until a drafting step is verified
        self.pick: int | None = None
        self.mark = self.own = self.caught = 0  # log mark; positions the step owes / appended
        self.deferred: list[Deferred] = []  # skip steps whose positions are still held
        self.arm_counts = {name: [0, 0, 0] for name in self.arm_names}  # pulls, tokens, µs
        self.counts["bandit_forced_steps"] = 0
        self.counts["bandit_timed_steps"] = 0  # rewards from measured seconds: not seed-only

    def _hold(self, features: torch.Tensor | None) -> torch.Tensor | None:
        """The held positions followed by the last step's (``[n, k, H]``), or ``None``."""
        if self.held is None or features is None:
            return features if self.held is None else self.held
        return torch.cat([self.held, features])

    def propose(self, ctx: Context) -> Draft:
        # 1. The last step's verified positions join those skip steps held back.
        held, self.mark = self._hold(ctx.target_features), len(self.lm.forward_log)
        self.own = 0 if ctx.target_features is None else int(ctx.target_features.shape[0])
        self.caught = 0
        depth_limit = min(self.policy.limit(), ctx.budget - 1)
        # 2. A forced step (nothing to draft from, or no room): the root alone, no arm, no reward.
        if depth_limit < 1 or (self.block1 is None and held is None):
            self.pick, self.held = None, held
            return Draft.empty(ctx.root)
        # 3. The arm, from the past only: statistics, context and coins forked for this step.
        coins = ctx.coins.fork(("bandit", ctx.step)) if self.rule.eps > 0 else None
        self.pick = self.rule.choose(self.context, coins)
        shape = self.shapes[self.pick]
        if shape is None:  # skip: no draft forward; the positions wait for a drafting step
            self.held = held
            return Draft.empty(ctx.root)
        # 4. Draft with the arm's shape, catching up on every held position in one forward.
        self.held, self.shape = None, shape
        self.caught = 0 if held is None else int(held.shape[0])
        return super().propose(replace(ctx, target_features=held))

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        super().observe(ctx, draft, verdict)
        if self.pick is None:
            self.counts["bandit_forced_steps"] += 1
            return
        # 1. The step's modeled time: its draft forwards and the target's verification, less
        #    the skip steps' share of its catch-up forward (their rewards are revised).
        verify = self.view.last_forward()
        assert verify is not None and verify.new_tokens == draft.size, "verification not last"
        drafts = self.lm.forward_log[self.mark :]
        seconds = self.clock([*drafts, verify]) - self._settle(drafts)
        if seconds <= 0:
            raise BadInput(
                f"a step priced at {seconds} s (measured forward times of 0: a test "
                "double?); give drafter.costs {role: [a, b]} to model them"
            )
        # 2. Reward = emitted tokens per second, to the arm pulled in this step's context.
        tokens = verdict.num_accepted + 1
        self.rule.update(self.pick, tokens / seconds, self.context)
        self.counts["bandit_timed_steps"] += int(self.clock.costs is None)
        count = self.arm_counts[self.arm_names[self.pick]]
        count[0], count[1], count[2] = (
            count[0] + 1,
            count[1] + tokens,
            count[2] + round(1e6 * seconds),
        )
        # 3. A skip step waits for its catch-up; a drafting step's verdict sets the context.
        if self.shapes[self.pick] is None:
            self.deferred.append(
                Deferred(
                    self.pick,
                    self.context,
                    self.rule.updates[self.context],
                    tokens,
                    seconds,
                    self.own,
                )
            )
        else:
            self.context = bisect.bisect_right(self.edges, verdict.num_accepted)

    def _settle(self, drafts: list) -> float:
        """Charge the waiting skip steps their share of this step's catch-up forward (the first
        draft record when positions were appended); returns the seconds charged to them."""
        if not (self.caught and self.deferred):
            return 0.0
        catch = drafts[0]
        assert catch.new_tokens == self.caught, "the catch-up must be the step's first forward"
        price, charged = self.clock([catch]), 0.0
        for d in self.deferred:
            extra = price * d.positions / self.caught
            self.rule.revise(
                d.arm, d.context, d.at, d.tokens / d.seconds, d.tokens / (d.seconds + extra)
            )
            self.arm_counts[self.arm_names[d.arm]][2] += round(1e6 * extra)
            charged += extra
        self.deferred = []
        return charged

    def counters(self) -> dict[str, int]:
        """Per arm ``bandit_<arm>_pulls``, ``_tokens`` (emitted) and ``_us`` (modeled step
        microseconds): the arm's share and its tokens per second (``arm_rates``); also
        ``bandit_forced_steps`` and ``bandit_timed_steps`` (rewards from measured seconds: the
        arms, so the tokens at T > 0, then depend on timing, not on the seed alone)."""
        out = dict(self.counts)
        for name, (pulls, tokens, us) in self.arm_counts.items():
            out.update(
                {
                    f"bandit_{name}_pulls": pulls,
                    f"bandit_{name}_tokens": tokens,
                    f"bandit_{name}_us": us,
                }
            )
        return out
