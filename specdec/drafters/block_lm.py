"""BlockLM: SpecBlock's draft-side cache of verified positions, and its forward log.

The SpecBlock network (``nets.specblock.net``) is not an HF decoder, so ``CachedLM`` cannot own
its cache. This class holds, per layer, the keys/values of **all K slots of every verified
position** (``[1, h_kv, positions·K, d]``; block 1 of later positions and block 2 attend to every
slot of earlier positions, so none can be dropped), computed with the target's real features. It
is append-only: a position enters once its features are known and never changes, because a
block-1 slot sees only earlier positions and its own position's lower slots (``AppendKeys``).
The keys live in preallocated buffers that grow geometrically, so an append writes only its own
slots (a concatenation would copy the whole cache at every step).

* ``append(cond, embeds)``: block 1 at ``n`` new positions (joins the cache), computed by
  ``nets.specblock.append`` (one causal attention over the flattened slots; the last layer's
  attention, MLP and heads only for the last position, the only one the drafter reads);
* ``chain(cond, embeds, ...)``: a later block at ``M`` leaves below position ``p`` (reads the cache,
  adds nothing): block 1's keys at positions ``< p`` and, at ``p``, its slots below each leaf's cut.

Every forward is logged as a ``ForwardRecord`` whose ``new_tokens`` counts *positions* (``n`` or
``M``; each is ``K`` slot rows) and whose ``context`` is the cached positions. ``forward``,
``keep``, ``crop`` and ``reset`` give the ``core.LM`` subset the cost calibration uses
(``bench.calibration``): ``forward`` appends positions with zero target features.
"""

from __future__ import annotations

import time

import torch

from specdec.core import LMOut
from specdec.forwards import ForwardRecord, current_lane, nonfinite_error
from specdec.nets.specblock.append import append_block
from specdec.nets.specblock.net import BlockOut, SpecBlockNet
from specdec.nets.specblock.slots import KV, ChainKeys
from specdec.threads import forward_budget


class BlockLM:
    """The SpecBlock network with its append-only cache of verified positions.

    Args:
        net: the drafter network (on the target's device and dtype).
        vocab_size: the target's vocabulary (the drafts' token ids live there).
    """

    role = "draft"
    takes_ids = False  # the calibration feeds ``inputs_embeds``

    def __init__(self, net: SpecBlockNet, vocab_size: int) -> None:
        self.net = net
        self.vocab_size = int(vocab_size)
        self.num_layers = len(net.layers)
        self.hidden_size = int(net.config.hidden_size)
        self.forward_log: list[ForwardRecord] = []
        self._buffers: list[KV] | None = None  # per layer keys, values [1, h_kv, capacity*K, d]
        self.reset()

    @property
    def dtype(self) -> torch.dtype:
        return self.net.head.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.net.head.weight.device

    @property
    def ids(self) -> list[int]:
        return []  # positions, not token ids, are cached

    def reset(self) -> None:
        self.positions = 0  # the buffers stay allocated for the next generation

    @property
    def cache(self) -> list[KV] | None:
        """Per layer the cached keys/values ``[1, h_kv, positions*K, d]`` (views of the
        buffers), or None before the first append."""
        if self._buffers is None:
            return None
        n = self.positions * self.net.slots
        return [(k[:, :, :n], v[:, :, :n]) for k, v in self._buffers]

    def crop(self, length: int) -> None:
        """Keep the first ``length`` positions."""
        assert 0 <= length <= self.positions, (length, self.positions)
        self.positions = length

    def keep(self, nodes: list[int]) -> None:
        """Nothing to resolve: appended positions are committed at once."""

    def _store(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> KV:
        """Write the new slots' ``k, v [1, h_kv, n*K, d]`` after the cached ones (the buffers
        grow geometrically: an append copies only its own slots, amortised) and return the
        cache with them, ``[1, h_kv, (positions + n)*K, d]`` (views)."""
        start, need = self.positions * self.net.slots, self.positions * self.net.slots + k.shape[2]
        if self._buffers is None or self._buffers[0][0].shape[2] < need:
            self._grow(k, need)
        bk, bv = self._buffers[layer]
        bk[:, :, start:need] = k
        bv[:, :, start:need] = v
        return bk[:, :, :need], bv[:, :, :need]

    def _grow(self, like: torch.Tensor, need: int) -> None:
        """Buffers of at least twice the old capacity (and ``need`` slots), the cache copied."""
        old = self._buffers
        cap = max(need, 2 * old[0][0].shape[2] if old is not None else 0, 64 * self.net.slots)
        shape = (*like.shape[:2], cap, like.shape[3])
        new = [(like.new_empty(shape), like.new_empty(shape)) for _ in range(self.num_layers)]
        if old is not None:
            n = self.positions * self.net.slots
            for (nk, nv), (ok, ov) in zip(new, old):
                nk[:, :, :n], nv[:, :, :n] = ok[:, :, :n], ov[:, :, :n]
        self._buffers = new

    @torch.inference_mode()
    def append(self, cond: torch.Tensor, embeds: torch.Tensor, keep: int = 1) -> BlockOut:
        """Block 1 at ``n`` new positions: ``cond [n, H]`` (``net.condition(f)``), ``embeds
        [n, H]`` (the tokens they read). Returns the block of the ``keep`` last positions (the
        others' outputs feed nothing; ``nets.specblock.append``) with a batch axis of 1."""
        n = int(cond.shape[0])
        first = torch.arange(self.positions + 1, self.positions + 1 + n, device=cond.device)
        cached = self.positions * self.net.slots
        out = self._timed(
            n,
            lambda: append_block(
                self.net, cond[None], embeds[None], first[None], self._store, cached, keep
            ),
        )
        self.positions += n
        return out

    @torch.inference_mode()
    def chain(
        self, cond: torch.Tensor, embeds: torch.Tensor, position: int, cut: torch.Tensor
    ) -> BlockOut:
        """A later block at ``M`` leaves of cached position ``position``.

        Args:
            cond: ``[M, H]`` the parent block's hidden at each leaf's source slot ``s``.
            embeds: ``[M, H]`` embeddings of the leaf tokens.
            position: the cached position whose block 1 the leaves continue.
            cut: ``[M]`` ``s + 1`` per leaf: visible block-1 slots at ``position``, and the offset.
        """
        m, k = int(cond.shape[0]), self.net.slots
        assert self._buffers is not None and position < self.positions
        cross = [(ck[:, :, : position * k], cv[:, :, : position * k]) for ck, cv in self._buffers]
        at = slice(position * k, (position + 1) * k)
        prefix = [
            (
                ck[:, :, at][:, :, None].expand(-1, -1, m, -1, -1),
                cv[:, :, at][:, :, None].expand(-1, -1, m, -1, -1),
            )
            for ck, cv in self._buffers
        ]  # [1, h_kv, M, K, d]
        seen = torch.ones(1, position * k, dtype=torch.bool)
        keys = ChainKeys(cross, seen, prefix, cut.cpu()[:, None], k)
        first = (position + 1 + cut).to(cond.device)  # [M]
        return self._timed(m, lambda: self.net.block(cond[None], embeds[None], first[None], keys))

    def forward(
        self,
        tokens: torch.Tensor,
        parent: torch.Tensor | None = None,
        *,
        hidden_layers=(),
        inputs_embeds: torch.Tensor | None = None,
    ) -> LMOut:
        """``core.LM`` shape for the cost calibration: append ``len(tokens)`` positions reading
        ``inputs_embeds [n, H]`` with zero target features (same cost as real ones); the logits
        are the last position's slot 0 (``[1, V_d]``), the only row ``append`` computes."""
        n = int(tokens.numel())
        embeds = (
            inputs_embeds
            if inputs_embeds is not None
            else torch.zeros(n, self.hidden_size, dtype=self.dtype)
        )
        embeds = embeds.to(device=self.device, dtype=self.dtype)
        out = self.append(torch.zeros_like(embeds), embeds)
        return LMOut(logits=out.logits[0, :, 0])

    def _timed(self, n: int, run) -> BlockOut:
        start = time.perf_counter()
        with forward_budget(None):  # the loop itself runs on one thread (threads.py)
            out = run()  # the first read of the fresh logits is part of the forward (CachedLM)
            bad = nonfinite_error(out.logits.flatten(0, 2), role=self.role, context=self.positions)
        end = time.perf_counter()
        where, step = current_lane()
        self.forward_log.append(
            ForwardRecord(self.role, n, self.positions, end - start, start, end, where, step)
        )
        if bad is not None:
            raise bad
        return out
