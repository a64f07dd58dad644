"""Draft-length policies: when a chain drafter stops drafting (fixed γ and adaptive rules).

A policy sees only the draft side (depth, the draft distribution of the next token, optionally the
draft hidden state), so any policy keeps speculative decoding lossless: the stopping decision is a
function of the draft, and the verifier's guarantee holds for every draft length.

Interface: ``limit()`` is the most tokens the next draft may hold; ``should_draft(state)`` is asked
before each token is drafted; ``observe(drafted, accepted)`` gets the verdict of each step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DraftState:
    """What a policy sees before drafting the token at ``depth`` (0-based).

    Attributes:
        depth: number of tokens already drafted in this step.
        q: ``[V]`` draft distribution of the token about to be drafted.
        hidden: ``[H]`` draft hidden state that produced ``q`` (when ``wants_hidden``), else None.
    """

    depth: int
    q: torch.Tensor
    hidden: torch.Tensor | None = None


class Policy:
    """Base draft-length policy: draft up to ``limit()`` tokens, never stop early."""

    #: whether ``should_draft`` needs the draft hidden state.
    wants_hidden: bool = False

    def reset(self) -> None:
        """Forget per-generation state."""

    def limit(self) -> int:
        raise NotImplementedError

    def should_draft(self, state: DraftState) -> bool:
        return True

    def observe(self, drafted: int, accepted: int) -> None:
        """Called after each verification with the step's drafted and accepted counts."""


class Fixed(Policy):
    """Always draft ``gamma`` tokens (Leviathan et al. 2023; Chen et al. 2023).

    Args:
        gamma: draft length γ ≥ 1.
    """

    def __init__(self, gamma: int = 4) -> None:
        if gamma < 1:
            raise ValueError(f"drafter.policy.gamma must be >= 1, got {gamma}; use method=ar for none")
        self.gamma = int(gamma)

    def limit(self) -> int:
        return self.gamma
