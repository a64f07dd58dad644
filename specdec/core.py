"""The decoding vocabulary of every method: Draft, Verdict, Context, Drafter, Verifier, Coins.

Terms (vLLM's spec-decode vocabulary; ``docs/architecture.md`` has the loop around them; the
``Coins`` protocol lives in ``specdec.coins``):

* **root**: the last committed token. It is never in the target cache when a step starts.
* **drafted** nodes: tokens a drafter proposes below the root; each is later **accepted**,
  **rejected** or **unreached** (below a rejected node).
* **recovered** token: sampled from a residual distribution after a rejection.
* **bonus** token: sampled from the target after every drafted node of a path was accepted.
* **emitted** tokens of a step: accepted + one recovered-or-bonus token (so ≥ 1 per step).

A ``Draft`` is a token tree rooted at the root: node 0 is the root, nodes 1..N-1 are drafted.
Distributions live on nodes and tokens on edges: ``q[i]`` (draft) and ``p[i]`` (target) are
distributions over the *children* of node ``i``. Siblings are i.i.d. draws from ``q[i]``; ``q=None``
means deterministic proposals, which verifiers treat as point masses (the EAGLE / vLLM n-gram rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch

from specdec.coins import Coins
from specdec.sampling_params import Sampling
from specdec.trees import is_chain

if TYPE_CHECKING:
    from specdec.forwards import ForwardRecord
    from specdec.models.placement import Held


@dataclass(frozen=True)
class Draft:
    """A token tree rooted at the last committed token.

    Attributes:
        tokens: ``[N]`` token ids; ``tokens[0]`` is the root.
        parent: ``[N]`` parent index per node; ``parent[0] = -1``; a chain has ``parent[i] = i-1``.
        q: ``[N, V]`` draft distribution over the children of each node, or ``None`` (point masses).
        features: ``[N, F]`` optional per-node features for policies and traces.
    """

    tokens: torch.Tensor
    parent: torch.Tensor
    q: torch.Tensor | None = None
    features: torch.Tensor | None = None

    def __post_init__(self) -> None:
        assert self.tokens.dim() == 1 and self.tokens.shape == self.parent.shape
        assert int(self.parent[0]) == -1, "node 0 must be the root"
        if self.q is not None:
            assert self.q.dim() == 2 and self.q.shape[0] == self.tokens.shape[0]

    @staticmethod
    def empty(root: int, device: torch.device | str = "cpu") -> Draft:
        """The draft of plain autoregressive decoding: the root alone."""
        return Draft.chain(root, torch.empty(0, dtype=torch.long, device=device), None)

    @staticmethod
    def chain(root: int, tokens: torch.Tensor, q: torch.Tensor | None) -> Draft:
        """A chain ``root -> tokens[0] -> tokens[1] ...``.

        Args:
            root: the last committed token id.
            tokens: ``[k]`` drafted token ids.
            q: ``[k+1, V]`` draft distributions (row ``k`` unused, may be zeros) or ``None``.
        """
        device = tokens.device
        ids = torch.cat([torch.tensor([root], dtype=torch.long, device=device), tokens.long()])
        parent = torch.arange(-1, ids.shape[0] - 1, device=device)  # [N]
        return Draft(ids, parent, q)

    @property
    def size(self) -> int:
        """Number of nodes including the root."""
        return int(self.tokens.shape[0])

    @property
    def num_drafted(self) -> int:
        return self.size - 1

    @property
    def is_chain(self) -> bool:
        return is_chain(self.parent)


@dataclass(frozen=True)
class Verdict:
    """The outcome of verifying a draft.

    Attributes:
        path: accepted node indices in order (root excluded); consecutive entries are parent/child.
        token: the recovered token (after a rejection) or bonus token (after full acceptance).
    """

    path: list[int]
    token: int

    @property
    def num_accepted(self) -> int:
        return len(self.path)

    def emitted(self, draft: Draft) -> list[int]:
        """Token ids this verdict emits: accepted tokens then the recovered/bonus token."""
        return [int(draft.tokens[i]) for i in self.path] + [self.token]


@dataclass(frozen=True)
class LMOut:
    """Output of one cached forward: ``logits [N, V]`` and optionally ``hidden [N, k, H]``."""

    logits: torch.Tensor
    hidden: torch.Tensor | None = None


class LM(Protocol):
    """What the engine and drafters need from an LM with a KV cache (see ``lm.CachedLM``)."""

    role: str
    vocab_size: int
    num_layers: int
    forward_log: list  # list[forwards.ForwardRecord]

    @property
    def ids(self) -> list[int]:
        """Token ids currently in the cache (the committed prefix)."""
        ...

    def reset(self) -> None: ...
    def forward(
        self,
        tokens: torch.Tensor,
        parent: torch.Tensor | None = None,
        *,
        hidden_layers: Sequence[int] = (),
        inputs_embeds: torch.Tensor | None = None,
    ) -> LMOut: ...
    def extend(
        self,
        tokens: torch.Tensor,
        parent: torch.Tensor,
        *,
        hidden_layers: Sequence[int] = (),
        inputs_embeds: torch.Tensor | None = None,
    ) -> LMOut: ...
    def reconcile(self, ids: list[int], *, hidden_layers: Sequence[int] = ()) -> LMOut: ...
    def keep(self, nodes: list[int]) -> None: ...
    def crop(self, length: int) -> None: ...
    def embed(self, tokens: torch.Tensor) -> torch.Tensor: ...
    def head(self, hidden: torch.Tensor) -> torch.Tensor: ...


class TargetView:
    """Read-only access to the target for feature drafters: its embedding and output head.

    ``embed(tokens [N]) -> [N, H]`` and ``head(hidden [N, H]) -> [N, V]`` run under inference mode
    and never touch the target's cache, so a drafter can share them without disturbing decoding;
    ``last_forward()`` reads the target's latest forward record (e.g. the verification's time).
    ``vocab_size``, ``num_layers``, ``hidden_size``, ``dtype`` and ``device`` describe the target
    (a feature drafter checks its own shapes against them).
    """

    def __init__(self, target: LM) -> None:
        self._target = target
        self.vocab_size, self.num_layers = target.vocab_size, target.num_layers
        probe = target.embed(torch.zeros(1, dtype=torch.long))  # [1, H]
        self.hidden_size, self.dtype, self.device = probe.shape[-1], probe.dtype, probe.device

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._target.embed(tokens)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        return self._target.head(hidden)

    def last_forward(self) -> ForwardRecord | None:
        """The target's latest forward record (in ``Drafter.observe``: the step's verification,
        e.g. its measured seconds), or ``None`` before any forward."""
        log = self._target.forward_log
        return log[-1] if log else None


@dataclass(frozen=True, kw_only=True)
class Context:
    """What a drafter sees at ``propose`` time (built by keyword).

    Attributes:
        tokens: ``[T]`` every committed token (prompt + generated); the root is last.
        coins: randomness for drafting (so exact enumeration covers draft randomness too);
            background work draws from ``coins.fork(key)``.
        sampling: this generation's warp (drafters read it here, not from their constructor).
        step: index of this decoding step (0-based), e.g. for fork keys.
        budget: tokens the generation may still emit; a step emits at most ``drafted + 1``
            tokens, so drafting more than ``budget - 1`` is wasted work (drafters cap at it).
        target_features: ``[n, k, H]`` target hidden states of the ``drafter.target_layers`` at
            the tokens the last step kept in the target cache (its root and accepted nodes), or
            ``None`` (first step, or a drafter without ``target_layers``).
        stop_ids: token ids that end the generation (drafting past one is wasted work).
    """

    tokens: torch.Tensor
    coins: Coins
    sampling: Sampling
    step: int = 0
    budget: int = 1 << 30
    target_features: torch.Tensor | None = None
    stop_ids: frozenset[int] = frozenset()

    @property
    def root(self) -> int:
        return int(self.tokens[-1])


class Drafter:
    """Proposes drafts. Subclasses own their draft model and reconcile it to ``ctx.tokens``.

    Background work (drafting while the target verifies) must run inside
    ``forwards.lane(<name>)``, draw from ``ctx.coins.fork(key)``, and be joined by the end of
    ``observe``: the engine reads the forward logs right after it.
    """

    #: the draft models this drafter owns (their forwards are logged and checked against the
    #: target's vocabulary); drafters with a model set ``self.models = [lm]``.
    models: Sequence[LM] = ()
    #: whether the drafts can branch (trees); the engine checks it against the verifier.
    makes_trees: bool = False
    #: target layers whose hidden states the drafter reads (feature drafters, e.g. EAGLE-3's
    #: low/middle/high): they reach ``prefill`` and ``Context.target_features``.
    target_layers: tuple[int, ...] = ()
    #: whether its own net reads the target's features, on the target's device (no draft_device)
    reads_target: bool = False

    def modules(self) -> dict[str, Held]:
        """Every module held, with its role (``specdec.models.placement.drafter_modules``)."""
        from specdec.models.placement import drafter_modules

        return drafter_modules(self)

    def reset(self) -> None:
        """Forget everything about the previous generation."""

    def attach(self, target: TargetView) -> None:
        """Read-only access to the target (embedding, head); called before every prefill."""

    def prefill(self, prompt: torch.Tensor, features: torch.Tensor | None = None) -> None:
        """Cache ``prompt[:-1]`` (``[T]``, every prompt token but the root) in each draft model.

        The engine calls it inside its timed prefill, so the draft's prompt forward is accounted
        as prefill, like the target's. ``features [T-1, k, H]``: the target's ``target_layers``
        hidden states of ``prompt[:-1]`` (``None`` without ``target_layers`` or when T = 1).
        Drafters whose models are not token LMs override it.
        """
        n = int(prompt.numel()) - 1
        for lm in self.models:
            if n > 0:
                lm.forward(prompt[:-1])
                lm.keep(list(range(n)))

    def observe(self, ctx: Context, draft: Draft, verdict: Verdict) -> None:
        """Feedback after verification (adaptive schedules, statistics); joins background work."""

    def counters(self) -> dict[str, int]:
        """Method counters since ``reset`` (cache hits, branches, rollbacks, ...); stored per
        prompt in the records and summed in summaries and the report."""
        return {}


@runtime_checkable
class Verifier(Protocol):
    """A pure accept/resample rule: ``verify(draft, p, coins) -> Verdict``.

    ``p [N, V]`` holds the (warped) target distributions over the children of each node. Class
    attributes: ``supports_trees`` and ``lossless`` (decided by the exact enumeration tests).
    """

    supports_trees: bool
    lossless: bool

    def verify(self, draft: Draft, p: torch.Tensor, coins: Coins) -> Verdict: ...
