"""FeatureDrafter: everything a drafter reading the target's features shares, but its net and tree.

A feature drafter (EAGLE-3, ``drafters.eagle3``; SpecBlock, ``drafters.specblock``) drafts with a
small net fed the target's own features. This base owns:

* **loading**: ``load(train_command)`` (the subclass's loader, e.g. ``load_eagle3``) gives the net;
  a missing or mismatched asset names ``python -m specdec.train +experiment=<experiment>``;
* **placement** (``specdec.models.placement``): the net reads the target's features, embedding and
  head, so it goes to the target's device in the target's dtype
  (``Placement.place(net, "features")``); the drafter never picks its own. ``reads_target``
  makes ``model.placement.draft_device`` refused before loading, and ``attach`` refuses a target
  elsewhere than the placement said;
* **target checks** at ``attach`` (before the first generation): the net's recorded hidden size,
  vocabulary and target layers against the target's (``nets.eagle3.feature_asset.check_target``);
* **catching up**: a cache of *verified* positions, each computed from the target's features
  there (``Context.target_features``: the prompt's at prefill, the newly kept nodes' after each
  step), fed to ``_advance`` at prefill and at the start of ``propose``;
* **the step**: ``propose`` caps the depth (``policy.limit()`` and the token budget), grows a
  ``Candidates`` tree (``drafters.candidates``) with the subclass's expansion rule, keeps the
  ``total_tokens`` best and returns their ``Draft`` (``q = None``: the tree is a deterministic
  function of the context, verified by the point-mass tree rules ``rrs`` or ``hsd``); ``observe``
  feeds the policy.

A subclass (a third feature drafter) implements only its net and its expansion rule::

    class MyDrafter(FeatureDrafter):
        name = "Mine"                              # in errors
        def __init__(self, policy, path, total_tokens=4, experiment="mine", placement=None):
            self.total = total_tokens
            super().__init__(policy, lambda command: load_mine(path, train_command=command),
                             cache=lambda net: CachedLM(net.decoder, role="draft", ...),
                             experiment=experiment, placement=placement)
        def _advance(self, tokens, features): ...  # forward verified positions [n, k, H]
        def _verified(self): ...                   # positions cached (the root's excluded)
        def _grow(self, tree, ctx, depth_limit): ...  # the expansion rule

(``tests/drafters/test_feature_base.py`` defines one in a few lines.)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from specdec.core import LM, Context, Draft, Drafter, TargetView, Verdict
from specdec.drafters.candidates import Candidates
from specdec.drafters.policies import Policy
from specdec.errors import BadInput
from specdec.models.devices import matches
from specdec.models.placement import Held, Placement
from specdec.models.retrain import retrain_command
from specdec.nets.eagle3.feature_asset import check_target


class FeatureDrafter(Drafter):
    """A drafter whose cache advances on the target's features of verified positions.

    Args:
        policy: ``policy.limit()`` caps the tree depth.
        load: the net, given the training command to name in errors (``nn.Module`` with
            ``meta`` -- ``target_hidden``, ``target_vocab``, ``target_layers`` -- and
            ``target_layers``).
        cache: the draft cache (an ``LM`` over the placed net: its forwards are logged and
            priced), or ``None`` for a net that keeps no cache of its own.
        experiment: the training experiment named in errors.
        asset: the folder the net loads from: the command named in errors exports there.
        placement: the pair's: the net goes to the target's device and dtype with the pair's CPU
            kernels (None: the CPU, the asset's dtype).
    """

    makes_trees = True
    reads_target = True
    name = "feature"  # the drafter's name in errors (EAGLE-3, SpecBlock)
    net: nn.Module
    total: int  # candidates kept per step (the target verifies one more); a subclass sets it

    def __init__(
        self,
        policy: Policy,
        load: Callable[[str], nn.Module],
        *,
        cache: Callable[[nn.Module], LM] | None = None,
        experiment: str,
        placement: Placement | None,
        asset: str | None = None,
    ) -> None:
        self.command = retrain_command(experiment, asset)  # writes `asset`, not <run>/export/
        self.net = self.place(load(self.command), placement)
        self.policy = policy
        self.target_layers = tuple(self.net.target_layers)
        self.lm = cache(self.net) if cache is not None else None
        self.models = [self.lm] if self.lm is not None else []
        self.view: TargetView | None = None
        self.reset()

    def place(self, net: nn.Module, placement: Placement | None) -> nn.Module:
        """``net`` on the placement's target device and dtype (None: the CPU, the net's dtype)."""
        dtype = next(net.parameters()).dtype
        return (placement or Placement.cpu(dtype)).place(net, "features")

    def modules(self) -> dict[str, Held]:
        policy = getattr(self, "policy", None)
        return {
            "drafter.net": Held("features", self.net),
            **(policy.modules() if policy is not None else {}),
        }

    def reset(self) -> None:
        if self.lm is not None:
            self.lm.reset()
        self.policy.reset()

    # --- the target ---------------------------------------------------------------------------
    def attach(self, target: TargetView) -> None:
        """Check the target once (shapes, then placement); keep its view (embedding, head)."""
        if self.view is None:
            check_target(
                self.net.meta,
                hidden=target.hidden_size,
                vocab=target.vocab_size,
                layers=target.num_layers,
                where="(drafter.path)",
                train_command=self.command,
                name=self.name,
            )
            self.check_view(target)
        self.view = target

    def check_view(self, target: TargetView) -> None:
        """Refuse a target on another device or dtype than the net was placed for."""
        weight = next(self.net.parameters())
        if not matches(target.device, weight.device) or target.dtype != weight.dtype:
            raise BadInput(
                f"the drafter's net was placed on {weight.device} in {weight.dtype}, but the "
                f"target runs on {target.device} in {target.dtype}; build the drafter with the "
                "pair's placement (placement=pair.placement, as bench.method.build_method does)"
            )

    # --- verified positions -------------------------------------------------------------------
    def _advance(self, tokens: list[int], features: torch.Tensor) -> None:
        """Forward the verified positions after those cached (features ``[n, k, H]``; position
        ``t`` reads the next token ``tokens[t + 1]``), keeping what drafting below the root
        needs."""
        raise NotImplementedError

    def _verified(self) -> int:
        """Verified positions cached (the last committed token, the root, is not one)."""
        raise NotImplementedError

    def prefill(self, prompt: torch.Tensor, features: torch.Tensor | None = None) -> None:
        if features is not None and features.shape[0] > 0:
            self._advance(prompt.tolist(), features)

    def catch_up(self, ctx: Context) -> list[int]:
        """Forward the positions verified by the last step; returns the committed token ids."""
        ids = ctx.tokens.tolist()
        if ctx.target_features is not None:
            self._advance(ids, ctx.target_features)
        return ids

    # --- the step -----------------------------------------------------------------------------
    def _grow(self, tree: Candidates, ctx: Context, depth_limit: int) -> None:
        """The expansion rule: add candidates below the root, none deeper than ``depth_limit``."""
        raise NotImplementedError

    def propose(self, ctx: Context) -> Draft:
        # 1. Catch up on the verified positions; draft nothing without one (a one-token prompt).
        ids = self.catch_up(ctx)
        depth_limit = min(self.policy.limit(), ctx.budget - 1)
        if self._verified() == 0 or depth_limit < 1:
            return Draft.empty(ctx.root)
        assert self._verified() == len(ids) - 1, (self._verified(), len(ids))
        # 2. The subclass's expansion rule grows the candidates; the best are the draft.
        tree = Candidates()
        self._grow(tree, ctx, depth_limit)
        return tree.to_draft(ctx.root, tree.best(self.total))

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        self.policy.observe(draft.num_drafted, verdict.num_accepted)
