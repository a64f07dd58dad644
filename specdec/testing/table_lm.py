"""TableLM: a fake cached LM whose next-token logits are a seeded random function of the prefix.

Context-dependent, tiny-vocabulary, float64 conditionals: exactly what the enumeration harness needs
to compare a method's output distribution with the target's autoregressive joint. It implements the
``core.LM`` protocol (``ids``, ``forward`` with chains and trees, ``extend``, ``keep``, ``crop``,
``reconcile``) with ``lm.CachedLM``'s pending-node semantics, so drafters and the engine use it
exactly as they use ``lm.CachedLM``. Each pending node is stored as its full context (prefix +
ancestors + itself), which is all its logits depend on.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from specdec.core import LMOut
from specdec.forwards import ForwardRecord, current_lane
from specdec.reconcile import reconcile_cache
from specdec.sampling import Sampling, warp
from specdec.trees import is_chain


class TableLM:
    """Next-token logits ``f(seed, prefix)`` over ``vocab_size`` tokens.

    Args:
        vocab_size: V.
        seed: the table's seed (two TableLMs with one seed are the same model).
        scale: standard deviation of the logits (larger = peakier conditionals).
        role: name in the forward log.
    """

    def __init__(self, vocab_size: int, seed: int, *, scale: float = 1.5, role: str = "target"):
        self.vocab_size, self.seed, self.scale, self.role = vocab_size, seed, scale, role
        self.num_layers = 1  # every "hidden state" of a table is its logits
        self.device, self.threads = torch.device("cpu"), None  # as ``lm.CachedLM`` (placement)
        self.forward_log: list[ForwardRecord] = []
        self._ids: list[int] = []
        self._pending: list[list[int]] = []  # full context of each pending node
        self._pending_chain = True
        self._memo: dict[tuple[int, ...], torch.Tensor] = {}

    def logits(self, context: tuple[int, ...]) -> torch.Tensor:
        """``[V]`` float64 logits of the next token after ``context``."""
        if context not in self._memo:
            gen = torch.Generator().manual_seed(hash((self.seed, *context)) & ((1 << 62) - 1))
            self._memo[context] = (
                torch.randn(self.vocab_size, generator=gen, dtype=torch.float64) * self.scale
            )
        return self._memo[context]

    @property
    def ids(self) -> list[int]:
        if self._pending_chain and self._pending:
            return list(self._pending[-1])
        return list(self._ids)

    def reset(self) -> None:
        self._ids, self._pending, self._pending_chain = [], [], True

    def crop(self, length: int) -> None:
        ids = self.ids
        assert 0 <= length <= len(ids)
        self._ids, self._pending, self._pending_chain = ids[:length], [], True

    def forward(
        self,
        tokens: torch.Tensor,
        parent: torch.Tensor | None = None,
        *,
        hidden_layers: Sequence[int] = (),
        inputs_embeds: torch.Tensor | None = None,
    ) -> LMOut:
        assert self._pending_chain or not self._pending, "call keep() after a tree forward"
        self._ids, self._pending = self.ids, []
        n = int(tokens.shape[0])
        parents = list(range(-1, n - 1)) if parent is None else parent.tolist()
        out = self._append(tokens, parents, hidden_layers, inputs_embeds)
        self._pending_chain = is_chain(parents)
        return out

    def extend(
        self,
        tokens: torch.Tensor,
        parent: torch.Tensor,
        *,
        hidden_layers: Sequence[int] = (),
        inputs_embeds: torch.Tensor | None = None,
    ) -> LMOut:
        out = self._append(tokens, parent.tolist(), hidden_layers, inputs_embeds)
        self._pending_chain = False
        return out

    def reconcile(self, ids: list[int], *, hidden_layers: Sequence[int] = ()) -> LMOut:
        return reconcile_cache(self, ids, hidden_layers=hidden_layers)

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """``[N, V]`` one-hot rows: the table's "embedding" (hidden size = V)."""
        return torch.nn.functional.one_hot(tokens.long(), self.vocab_size).double()

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """The identity: a TableLM's hidden states are its logits."""
        return hidden

    def _append(
        self,
        tokens: torch.Tensor,
        parents: list[int],
        hidden_layers: Sequence[int],
        inputs_embeds: torch.Tensor | None,
    ) -> LMOut:
        """New pending nodes; ``parents`` index the pending set (``-1``: the committed prefix).

        ``inputs_embeds`` must be the tokens' own one-hot rows (a table has no other input);
        every requested hidden layer is the node's logits (``hidden [N, k, V]``).
        """
        if inputs_embeds is not None:
            assert torch.equal(inputs_embeds, self.embed(tokens)), "a TableLM reads token ids"
        before = len(self._pending)
        for tok, par in zip(tokens.tolist(), parents):
            assert -1 <= par < len(self._pending), (par, len(self._pending))
            base = self._ids if par < 0 else self._pending[par]
            self._pending.append([*base, int(tok)])
        new = self._pending[before:]
        where, step = current_lane()
        self.forward_log.append(
            ForwardRecord(self.role, len(new), len(self._ids) + before, 0.0, lane=where, step=step)
        )
        logits = torch.stack([self.logits(tuple(c)) for c in new])  # [N, V]
        hidden = None
        if hidden_layers:
            hidden = logits[:, None].expand(-1, len(hidden_layers), -1).clone()  # [N, k, V]
        return LMOut(logits=logits, hidden=hidden)

    def keep(self, nodes: list[int]) -> None:
        if nodes:
            self._ids = list(self._pending[nodes[-1]])
        self._pending, self._pending_chain = [], True


def ar_joint(
    lm: TableLM, prompt: list[int], length: int, sampling: Sampling
) -> dict[tuple[int, ...], float]:
    """Exact distribution of the next ``length`` tokens when sampling ``lm`` autoregressively."""
    out: dict[tuple[int, ...], float] = {}
    for seq in itertools.product(range(lm.vocab_size), repeat=length):
        prob, ctx = 1.0, list(prompt)
        for tok in seq:
            prob *= float(warp(lm.logits(tuple(ctx))[None], sampling)[0, tok])
            if prob == 0.0:
                break
            ctx.append(tok)
        if prob > 0:
            out[seq] = prob
    return out
