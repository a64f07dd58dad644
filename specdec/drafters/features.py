"""FeatureDrafter: the part every feature drafter shares -- catching up on verified positions.

A feature drafter (EAGLE-3, ``drafters.eagle3``; SpecBlock, ``drafters.specblock``) keeps its own
cache of *verified* positions, each computed from the target's features there
(``Context.target_features``: the prompt's at prefill, the newly kept nodes' after each step).
Subclasses implement ``_advance(tokens, features)`` (forward those positions; position ``t`` reads
the next token ``tokens[t + 1]``); this base feeds it at prefill and at the start of ``propose``.
"""

from __future__ import annotations

import torch

from specdec.core import Context, Drafter


class FeatureDrafter(Drafter):
    """A drafter whose cache advances on the target's features of verified positions."""

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
