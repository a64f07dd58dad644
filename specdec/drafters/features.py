"""FeatureDrafter: the part every feature drafter shares -- catching up on verified positions.

A feature drafter (EAGLE-3, ``drafters.eagle3``; SpecBlock, ``drafters.specblock``) keeps its own
cache of *verified* positions, each computed from the target's features there
(``Context.target_features``: the prompt's at prefill, the newly kept nodes' after each step).
Subclasses implement ``_advance(tokens, features)`` (forward those positions; position ``t`` reads
the next token ``tokens[t + 1]``); this base feeds it at prefill and at the start of ``propose``.

Placement (``specdec.placement``): a feature drafter's net reads the target's features, embedding
and head, so it is placed at construction on the target's device in the target's dtype
(``Placement.place(net, "features")``); ``reads_target`` makes ``model.draft_device`` refused before
loading, and ``check_view`` refuses a target elsewhere than the placement said.
"""

from __future__ import annotations

import torch
from torch import nn

from specdec.core import Context, Drafter, TargetView
from specdec.errors import BadInput
from specdec.placement import Held, Placement, matches


class FeatureDrafter(Drafter):
    """A drafter whose cache advances on the target's features of verified positions."""

    reads_target = True
    net: nn.Module

    def place(self, net: nn.Module, placement: Placement | None) -> nn.Module:
        """``net`` on the placement's target device and dtype (None: the CPU, the net's dtype)."""
        dtype = next(net.parameters()).dtype
        return (placement or Placement.cpu(dtype)).place(net, "features")

    def modules(self) -> dict[str, Held]:
        policy = getattr(self, "policy", None)
        return {"drafter.net": Held("features", self.net),
                **(policy.modules() if policy is not None else {})}

    def check_view(self, target: TargetView) -> None:
        """Refuse a target on another device or dtype than the net was placed for."""
        weight = next(self.net.parameters())
        if not matches(target.device, weight.device) or target.dtype != weight.dtype:
            raise BadInput(
                f"the drafter's net was placed on {weight.device} in {weight.dtype}, but the "
                f"target runs on {target.device} in {target.dtype}; build the drafter with the "
                "pair's placement (placement=pair.placement, as bench.method.build_method does)")

    def _advance(self, tokens: list[int], features: torch.Tensor) -> None:
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
