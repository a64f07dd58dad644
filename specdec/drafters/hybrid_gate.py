"""ModelGate: when the hybrid drafter skips its model tree for a step (``drafters.hybrid``).

The hybrid pays its feature drafter's forwards every step (a catch-up forward on the verified
positions, then one forward per tree depth), even in steps whose accepted tokens come from a prompt
lookup chain: on copy-heavy text (RAG, summaries, translation) those forwards are mostly wasted.
The gate skips them when the lookup chains alone are expected to do as well.

**Rule** (``gate: auto``). Before the model tree is grown, each lookup chain is scored by its
expected accepted length under the hybrid's running lookup rates (``drafters.acceptance``):

    E = sum_{d=1..D} prod_{j<=d} r(L, j)

for a chain of ``D`` tokens below a suffix match of length ``L`` (the sum of its nodes' estimates
of being accepted). The model tree is skipped when the best chain's

    E_best >= tokens + m,

``m`` being the model's running *added* tokens per step: the discounted mean, over the steps the
model tree was grown, of the accepted nodes that only the model proposed (a node on a lookup chain
too would have been accepted without the model), from a prior of ``prior`` tokens with
pseudo-count ``weight`` (as the other running estimates, ``drafters.acceptance``). So a chain is
trusted when it is expected to give ``tokens`` more than the model tree usually adds on top of
lookup. Where the model carries the text (math, QA: ``m`` high, matches short, ``E`` near its
prior) the gate stays shut; where the text is copied (``m`` near 0, long matches accepted, ``E``
near the chain's length) it opens. A chain whose rates were never measured has ``E < 1`` (lookup
prior 0.5), below the model's prior of one added token, so the first steps of a generation grow
the model. ``m`` overestimates what the model adds in a step with a strong chain (the model adds
most where lookup fails), so the rule errs towards growing the model. ``gate: off`` never skips.

Why a margin of 0 tokens (the default) and not more: the skipped forwards are worth more than the
fraction of a token ``m`` stands for. On a CPU a feature drafter's step (a catch-up and one forward
per tree depth) costs a sizeable fraction of the target's verify forward, so a step that gives up
``m`` expected tokens to skip them still gains wherever ``m`` is a small fraction of a step's
tokens, as on copied text.

**Deferred catch-up.** A skipped step runs no model forward at all: the target features of the
positions it verified (``Context.target_features``) are held, and the next step that grows the
model tree hands all held positions and its own to the feature drafter's ``catch_up`` in one
forward (both ``Eagle3Drafter._advance`` and ``SpecBlockDrafter._advance`` take ``n`` consecutive
verified positions with their features ``[n, k, H]``). Positions still held when the generation
ends are never forwarded.

**Exactness.** ``E`` reads the context's matches and rates learned from past verdicts, ``m`` past
verdicts only: whether a step grows the model tree is a deterministic function of the context and
the past, never of this step's coins, so the draft stays a deterministic tree (``q = None``) that
the point-mass tree rules verify exactly.
"""

from __future__ import annotations

import torch

from specdec.errors import BadInput

GATES = ("auto", "off")


class ModelGate:
    """Skips the model tree when the best lookup chain is trusted; holds the skipped features.

    Args:
        mode: ``auto`` (the rule above) or ``off`` (never skip).
        tokens: the margin, in expected tokens, of the best chain over the model's added tokens.
        discount: per-step decay of the model's running counts.
        prior: the model's prior added tokens per step; weight: its pseudo-count.
    """

    def __init__(
        self,
        mode: str = "auto",
        tokens: float = 0.0,
        discount: float = 0.98,
        prior: float = 1.0,
        weight: float = 2.0,
    ) -> None:
        if mode not in GATES:
            raise BadInput(f"drafter.gate must be one of {list(GATES)}, got {mode!r}")
        if not float(tokens) >= 0:
            raise BadInput(
                f"drafter.gate_tokens must be >= 0 (expected tokens of the best lookup chain over "
                f"the model's added tokens per step), got {tokens}"
            )
        self.mode, self.tokens, self.discount = mode, float(tokens), float(discount)
        self.prior, self.weight = float(prior), float(weight)
        self.fresh()
        self.reset()

    def fresh(self) -> None:
        """Forget the model's running added tokens (``persist: false`` does at every reset)."""
        self.added = self.steps = 0.0

    def reset(self) -> None:
        """A new generation: no positions held."""
        self.held: torch.Tensor | None = None  # [n, k, H] features of the skipped steps' positions

    @property
    def model_added(self) -> float:
        """``m``: the model's running added tokens per grown step (its prior before any)."""
        return (self.added + self.prior * self.weight) / (self.steps + self.weight)

    def skip(self, best: float) -> bool:
        """Whether to skip the model tree given the best chain's expected accepted length."""
        return self.mode == "auto" and best >= self.tokens + self.model_added

    def hold(self, features: torch.Tensor | None) -> None:
        """Keep a skipped step's verified positions (``[n, k, H]``) for the next catch-up."""
        if features is not None:
            self.held = features if self.held is None else torch.cat([self.held, features])

    def release(self, features: torch.Tensor | None) -> torch.Tensor | None:
        """The held positions followed by this step's (``[n, k, H]``); nothing stays held."""
        held, self.held = self.held, None
        if held is None or features is None:
            return features if held is None else held
        return torch.cat([held, features])

    def update(self, added: int) -> None:
        """A grown step's verdict: how many accepted nodes only the model proposed."""
        self.added = self.discount * self.added + float(added)
        self.steps = self.discount * self.steps + 1.0
