"""Draft-length policies: when a chain drafter stops drafting (fixed γ and adaptive rules).

A policy sees only the draft side (depth, the draft distribution of the next token, the draft
hidden state), so any policy keeps speculative decoding lossless: the stopping decision is a
function of the draft, and the verifier's guarantee holds for every draft length
(``tests/drafters/test_policies_exact.py`` proves it by exact enumeration for every policy here).

Interface: ``limit()`` is the most tokens the current draft may hold; the drafter reads it before
each token, and a policy may lower it while a draft is being made (SpecDec++ decides, before
drafting token s, that s is the last one, so the drafter does not score it). ``should_draft(state)``
is asked before each token is drafted; ``observe(drafted, accepted)`` gets the verdict of each step.

Policies: ``Fixed`` (γ), ``Heuristic`` (transformers' +2/−1 schedule), ``AdaEDL`` (entropy bound);
``SpecDecPP`` (trained acceptance head) is in ``specdec.drafters.specdecpp``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch

from specdec.errors import BadInput
from specdec.models.placement import Held
from specdec.sampling_params import Sampling

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DraftState:
    """What a policy sees before drafting the token at ``depth`` (0-based).

    Attributes:
        depth: number of tokens already drafted in this step.
        q: ``[V]`` (warped) draft distribution of the token about to be drafted; ``None`` for a
            greedy draft when the policy does not read it (``Policy.wants_q``).
        hidden: ``[H]`` draft last-layer hidden state that produced ``q`` (when ``wants_hidden``),
            i.e. the state at the position of the last drafted token (of the root at depth 0).
        logits: ``[V]`` raw draft logits that produced ``q`` (None for drafters without them).
        sampling: the step's sampling (``Context.sampling``) that warped ``q`` (None: not given).
    """

    depth: int
    q: torch.Tensor | None
    hidden: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    sampling: Sampling | None = None


class Policy:
    """Base draft-length policy: draft up to ``limit()`` tokens, never stop early."""

    #: whether ``should_draft`` needs the draft hidden state.
    wants_hidden: bool = False
    #: whether ``should_draft`` reads ``state.q`` (a greedy drafter skips building it otherwise).
    wants_q: bool = True

    def reset(self) -> None:
        """Forget per-generation state."""

    def limit(self) -> int:
        raise NotImplementedError

    def longest(self) -> int:  # the largest limit() ever returned (tree size cap: limits.py)
        return self.limit()

    def should_draft(self, state: DraftState) -> bool:
        return True

    def observe(self, drafted: int, accepted: int) -> None:
        """Called after each verification with the step's drafted and accepted counts."""

    def modules(self) -> dict[str, Held]:
        """The modules the policy holds, with their placement roles
        (``specdec.models.placement``)."""
        return {}


def check_bounds(name: str, low: int, max_len: int) -> None:
    """Raise ``ValueError`` unless ``1 <= low <= max_len``."""
    if not 1 <= low <= max_len:
        raise BadInput(f"need 1 <= drafter.policy.{name} <= max_len, got {low} and {max_len}")


class Fixed(Policy):
    """Always draft ``gamma`` tokens (Leviathan et al. 2023; Chen et al. 2023).

    Args:
        gamma: draft length γ ≥ 1.
    """

    def __init__(self, gamma: int = 4) -> None:
        if gamma < 1:
            raise BadInput(f"drafter.policy.gamma must be >= 1, got {gamma}; use method=ar")
        self.gamma = int(gamma)

    wants_q = False

    def limit(self) -> int:
        return self.gamma


class Heuristic(Policy):
    """transformers' ``num_assistant_tokens_schedule="heuristic"``: +2 after a fully accepted draft,
    −1 otherwise, never below 1 (and here never above ``max_len``).

    The length restarts at ``initial`` for every generation (transformers' ``heuristic_transient``;
    its plain ``heuristic`` carries the length over to the next ``generate`` call, which makes
    results depend on prompt order).

    Args:
        initial: draft length of the first step (transformers' historical default 5).
        max_len: upper bound on the draft length.
    """

    def __init__(self, initial: int = 5, max_len: int = 20) -> None:
        check_bounds("initial", initial, max_len)
        self.initial, self.max_len = int(initial), int(max_len)
        self.current = self.initial

    wants_q = False

    def reset(self) -> None:
        self.current = self.initial

    def longest(self) -> int:  # limit() grows up to max_len
        return self.max_len

    def limit(self) -> int:
        return self.current

    def observe(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        step = 2 if accepted == drafted else -1
        self.current = min(self.max_len, max(1, self.current + step))


def entropy(probs: torch.Tensor) -> float:
    """Shannon entropy in nats of a 1-D distribution (0 log 0 = 0)."""
    p = probs.double()
    return float(-(p * torch.log(p.clamp_min(1e-300))).sum())


class AdaEDL(Policy):
    """AdaEDL: stop drafting when an entropy-based lower bound on acceptance falls below λ.

    Agrawal, Jeon & Lee 2024, "AdaEDL: Early Draft Stopping for Speculative Decoding of Large
    Language Models via an Entropy-based Lower Bound on Token Acceptance Probability"
    (arXiv:2410.18351). Before drafting a token with draft distribution ``q`` the bound is
    ``b = 1 − sqrt(γ_e · H(q))`` (``entropy_scale`` = γ_e ≈ 0.2, H in nats); the token is drafted
    only while ``b ≥ λ`` (within the bounds ``min_len ≤ depth < max_len``). Under greedy decoding
    ``q`` is a point mass (b = 1), so H is taken from the raw draft softmax instead.

    λ adapts online (our rule, documented here because the paper's constants are not reproduced):
    the bound is loose by an unknown amount, so we track its *slack* on tokens the verifier reached
    — ``s = EMA(per-token acceptance) − EMA(mean bound of the reached tokens)`` — and use
    ``λ_t = clip(threshold − s, 0, 1)``. Per step with ``k`` drafted and ``a`` accepted tokens the
    reached tokens are the first ``min(k, a + 1)`` (those after the first rejection were never
    tested), their acceptance is ``a / reached``, and both EMAs use weight ``1 − ema`` on the new
    step (start: slack 0). A draft model whose bound is pessimistic (high observed acceptance)
    lowers λ and drafts longer; an optimistic one raises λ.

    Args:
        threshold: λ₀, the level the slack-corrected acceptance estimate must reach.
        entropy_scale: γ_e.
        min_len, max_len: draft-length bounds (min_len ≥ 1 keeps feedback flowing).
        ema: EMA decay of the slack statistics (0 = only the last step).
    """

    def __init__(
        self,
        threshold: float = 0.5,
        entropy_scale: float = 0.2,
        *,
        min_len: int = 1,
        max_len: int = 8,
        ema: float = 0.9,
    ) -> None:
        check_bounds("min_len", min_len, max_len)
        if not 0.0 <= threshold <= 1.0:
            raise BadInput(
                f"drafter.policy.threshold={threshold} is not valid: expected a "
                "number in [0, 1] (a level of the acceptance bound)"
            )
        if entropy_scale <= 0 or not 0 <= ema < 1:
            raise BadInput("drafter.policy.entropy_scale must be > 0 and ema in [0, 1)")
        self.threshold, self.entropy_scale = float(threshold), float(entropy_scale)
        self.min_len, self.max_len, self.ema = int(min_len), int(max_len), float(ema)
        self.reset()

    def reset(self) -> None:
        self.accept_ema: float | None = None
        self.bound_ema: float | None = None
        self.bounds: list[float] = []  # bound of each token drafted in the current step

    @property
    def lam(self) -> float:
        """The current adaptive threshold λ_t."""
        slack = 0.0 if self.accept_ema is None else self.accept_ema - self.bound_ema
        return min(1.0, max(0.0, self.threshold - slack))

    def bound(self, state: DraftState) -> float:
        """``1 − sqrt(γ_e · H)`` for the token about to be drafted."""
        h = entropy(state.q)
        if h == 0.0 and state.logits is not None:  # greedy: point mass, use the raw softmax
            h = entropy(torch.softmax(state.logits.double(), -1))
        return 1.0 - math.sqrt(self.entropy_scale * h)

    def limit(self) -> int:
        return self.max_len

    def should_draft(self, state: DraftState) -> bool:
        if state.depth == 0:
            self.bounds = []
        b = self.bound(state)
        if state.depth >= self.min_len and b < self.lam:
            return False
        self.bounds.append(b)
        return True

    def observe(self, drafted: int, accepted: int) -> None:
        if drafted == 0:
            return
        reached = min(drafted, accepted + 1)
        acc, bnd = accepted / reached, sum(self.bounds[:reached]) / reached
        if self.accept_ema is None:
            self.accept_ema, self.bound_ema = acc, bnd
        else:
            w = 1.0 - self.ema
            self.accept_ema += w * (acc - self.accept_ema)
            self.bound_ema += w * (bnd - self.bound_ema)
        self.bounds = []
