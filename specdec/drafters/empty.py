"""The empty drafter: plain autoregressive decoding as a draft with no drafted nodes.

With it, every step verifies the root alone, so the verifier samples one token from ``p[0]`` and AR
runs through the same loop and accounting as every speculative method.
"""

from __future__ import annotations

from specdec.core import LM, Context, Draft, Drafter


class EmptyDrafter(Drafter):
    """Proposes ``Draft.empty(root)`` every step (no draft model)."""

    def __init__(self) -> None:
        self.models: list[LM] = []

    def propose(self, ctx: Context) -> Draft:
        return Draft.empty(ctx.root)
